#include "engine/io/atomic_file.h"

#include <cerrno>
#include <cstring>
#include <filesystem>

#include <fcntl.h>
#include <unistd.h>

namespace tandem::engine::io {
namespace {

Status Errno(int err, const std::string& what) { return Status::Internal(what + ": " + std::strerror(err)); }

Status WriteAll(int fd, std::span<const std::byte> bytes, const std::string& path) {
  while (!bytes.empty()) {
    ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0) {
      int err = errno;
      if (err == EINTR) continue;
      return Errno(err, "writing " + path);
    }
    bytes = bytes.subspan(static_cast<size_t>(n));
  }
  return Status::Ok();
}

Status WriteAndSync(int fd, std::span<const std::span<const std::byte>> pieces, const std::string& path) {
  for (std::span<const std::byte> piece : pieces) RETURN_IF_ERROR(WriteAll(fd, piece, path));
  if (::fsync(fd) != 0) {
    int err = errno;
    return Errno(err, "fsync " + path);
  }
  return Status::Ok();
}

// Best effort: makes the rename durable. Some filesystems refuse fsync on a directory.
void SyncDirectory(const std::string& path) {
  std::string dir = std::filesystem::path(path).parent_path().string();
  int fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  (void)::fsync(fd);
  ::close(fd);
}

}  // namespace

Status WriteFileAtomically(const std::string& path, std::span<const std::span<const std::byte>> pieces) {
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    int err = errno;
    return Errno(err, "creating " + tmp);
  }
  Status status = WriteAndSync(fd, pieces, tmp);
  if (::close(fd) != 0 && status.ok()) {
    int err = errno;
    status = Errno(err, "closing " + tmp);
  }
  if (status.ok() && ::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    status = Errno(err, "renaming " + tmp + " to " + path);
  }
  if (!status.ok()) {
    ::unlink(tmp.c_str());
    return status;
  }
  SyncDirectory(path);
  return Status::Ok();
}

}  // namespace tandem::engine::io
