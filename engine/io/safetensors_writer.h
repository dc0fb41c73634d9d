#pragma once
// Writing safetensors files: plan the layout (pure), then serialize it to memory or to disk.
//
// Layout, as the reference implementation writes it: the JSON header is compact and padded with
// spaces to a multiple of 8 bytes; tensors follow in order of element size (largest first), then
// name. Every element-size class therefore starts aligned to its element size relative to the
// 8-aligned data section, so a mapped file can be read in place.

#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"
#include "engine/core/dtype.h"

namespace tandem::engine::io {

using SafetensorsMetadata = std::map<std::string, std::string>;

// A tensor to write. `data` is borrowed and must outlive the call it is passed to.
struct TensorToWrite {
  std::string name;
  DType dtype = DType::kU8;
  std::vector<int64_t> shape;  // [] for a scalar
  std::span<const std::byte> data;
};

struct SafetensorsPlan {
  std::string header;                       // 8-byte length prefix + JSON + padding
  std::vector<const TensorToWrite*> order;  // the data section, in file order
  uint64_t file_bytes = 0;
};

// Validates the tensors and computes the header. Errors (InvalidArgument): an empty, duplicate
// or reserved ("__metadata__") name; a negative dimension; data whose size is not elements x
// dtype size. The plan points into `tensors`, which must outlive it.
StatusOr<SafetensorsPlan> PlanSafetensors(std::span<const TensorToWrite> tensors,
                                          const SafetensorsMetadata& metadata);

// The whole file image in memory (tests, small files).
StatusOr<std::vector<std::byte>> SerializeSafetensors(std::span<const TensorToWrite> tensors,
                                                      const SafetensorsMetadata& metadata = {});

// Writes `path` atomically: a temporary file beside it is written, fsynced and renamed over
// `path`, so readers see the old file or the complete new one. The parent directory must exist.
Status WriteSafetensors(const std::string& path, std::span<const TensorToWrite> tensors,
                        const SafetensorsMetadata& metadata = {});

}  // namespace tandem::engine::io
