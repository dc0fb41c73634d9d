#pragma once
// Reading one .safetensors file: mmap it, validate its header (safetensors_header.h) and hand out
// views of its tensors without copying.

#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "engine/core/dtype.h"
#include "engine/io/mapped_file.h"

namespace tandem::engine::io {

// One tensor of an open file. `data` points into the file's mapping and lives as long as the
// SafetensorsFile (or Checkpoint) that handed it out. Its alignment is whatever the file gives:
// the format does not promise any, so read it through memcpy or check before reinterpreting.
struct TensorView {
  std::string name;
  DType dtype = DType::kU8;
  std::vector<int64_t> shape;  // [] for a scalar
  std::span<const std::byte> data;

  int64_t num_elements() const;
};

// A validated, read-only, memory-mapped safetensors file. Move-only; moves keep views valid.
// Thread-safe for concurrent readers (nothing mutates after Open).
class SafetensorsFile {
 public:
  // Maps and validates `path`. Errors: those of MappedFile::Open and ParseSafetensors, each naming
  // the file.
  static StatusOr<SafetensorsFile> Open(const std::string& path);

  // The tensor called `name`, or nullptr.
  const TensorView* Find(std::string_view name) const;
  const std::vector<TensorView>& tensors() const { return tensors_; }  // sorted by name
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const std::string& path() const { return file_.path(); }

 private:
  SafetensorsFile() = default;

  MappedFile file_;
  std::vector<TensorView> tensors_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace tandem::engine::io
