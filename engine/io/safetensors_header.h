#pragma once
// Parsing and validating a safetensors file image: the layout of its tensors, without touching
// their bytes. Pure (no I/O), so tests and the fuzzer (fuzz/) drive it from memory.
//
// File format: [u64 little-endian N][N bytes of JSON header, maybe space-padded][data section].
// The header is an object: tensor name -> {"dtype": "F32", "shape": [2, 3], "data_offsets":
// [begin, end]} with offsets relative to the data section, plus an optional "__metadata__" object
// of string -> string.
//
// Validation is strict where a mistake would read the wrong bytes and lenient where it cannot:
// every tensor must fit in the data section, its byte span must equal elements x dtype size, and
// no two non-empty tensors may share a byte. Gaps between tensors and bytes after the last one
// are accepted (the reference loader rejects them; nothing is read from them, and our writer
// never produces them).

#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "engine/core/dtype.h"

namespace tandem::engine::io {

// Headers larger than this are refused before any parsing (the reference implementation's cap).
inline constexpr uint64_t kMaxSafetensorsHeaderBytes = 100'000'000;

struct SafetensorsTensorInfo {
  std::string name;
  DType dtype = DType::kU8;
  std::vector<int64_t> shape;  // [] for a scalar (one element)
  uint64_t begin = 0;          // byte offsets into the whole file image, begin <= end
  uint64_t end = 0;

  uint64_t size_bytes() const { return end - begin; }
};

struct SafetensorsLayout {
  uint64_t data_offset = 0;                    // 8 + header length: where the data section starts
  std::vector<SafetensorsTensorInfo> tensors;  // sorted by name
  std::map<std::string, std::string> metadata;
};

// Parses and validates `image`, the complete contents of a safetensors file. `file_name` only
// labels error messages. Errors: DataLoss for a truncated or malformed file (message names the
// file and, where one is at fault, the tensor); InvalidArgument for a dtype the engine does not
// handle. Never reads outside `image`.
StatusOr<SafetensorsLayout> ParseSafetensors(std::span<const std::byte> image, std::string_view file_name);

}  // namespace tandem::engine::io
