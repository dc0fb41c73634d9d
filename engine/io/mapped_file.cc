#include "engine/io/mapped_file.h"

#include <cerrno>
#include <cstring>
#include <utility>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace tandem::engine::io {
namespace {

Status ErrnoStatus(int err, const std::string& what) {
  std::string message = what + ": " + std::strerror(err);
  switch (err) {
    case ENOENT:
    case ENOTDIR: return Status::NotFound(std::move(message));
    case EACCES:
    case EPERM: return Status::PermissionDenied(std::move(message));
    default: return Status::Internal(std::move(message));
  }
}

}  // namespace

StatusOr<MappedFile> MappedFile::Open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(errno, "opening " + path);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    return ErrnoStatus(err, "stat " + path);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status::InvalidArgument(path + " is not a regular file");
  }
  auto size_bytes = static_cast<size_t>(st.st_size);
  void* addr = nullptr;
  if (size_bytes > 0) {
    addr = ::mmap(nullptr, size_bytes, PROT_READ, MAP_PRIVATE, fd, 0);
    if (addr == MAP_FAILED) {
      int err = errno;
      ::close(fd);
      return ErrnoStatus(err, "mmap " + path);
    }
  }
  ::close(fd);  // the mapping keeps its own reference to the file
  return MappedFile(path, addr, size_bytes);
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : path_(std::move(other.path_)),
      addr_(std::exchange(other.addr_, nullptr)),
      size_bytes_(std::exchange(other.size_bytes_, 0)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    Reset();
    path_ = std::move(other.path_);
    addr_ = std::exchange(other.addr_, nullptr);
    size_bytes_ = std::exchange(other.size_bytes_, 0);
  }
  return *this;
}

MappedFile::~MappedFile() { Reset(); }

void MappedFile::Reset() {
  if (addr_ != nullptr) ::munmap(addr_, size_bytes_);
  addr_ = nullptr;
  size_bytes_ = 0;
}

}  // namespace tandem::engine::io
