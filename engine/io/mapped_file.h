#pragma once
// A read-only memory mapping of a whole file.

#include <cstddef>
#include <span>
#include <string>

#include "common/status.h"

namespace tandem::engine::io {

// Owns a read-only, private mmap of one file for its lifetime. Move-only; moving keeps the
// mapping's address, so spans into data() stay valid for as long as some MappedFile owns it.
// The mapping reflects the file as it is on disk: a file truncated by another process while mapped
// raises SIGBUS on access, as with any mmap reader (checkpoints are treated as immutable).
class MappedFile {
 public:
  // Maps `path`. An empty file maps to an empty span. Errors: NotFound, PermissionDenied,
  // InvalidArgument (not a regular file), Internal (mmap failed).
  static StatusOr<MappedFile> Open(const std::string& path);

  MappedFile() = default;
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  std::span<const std::byte> data() const { return {static_cast<const std::byte*>(addr_), size_bytes_}; }
  const std::string& path() const { return path_; }

 private:
  MappedFile(std::string path, void* addr, size_t size_bytes)
      : path_(std::move(path)), addr_(addr), size_bytes_(size_bytes) {}
  void Reset();

  std::string path_;
  void* addr_ = nullptr;  // nullptr for an empty file
  size_t size_bytes_ = 0;
};

}  // namespace tandem::engine::io
