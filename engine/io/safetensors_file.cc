#include "engine/io/safetensors_file.h"

#include <algorithm>
#include <utility>

#include "engine/io/safetensors_header.h"

namespace tandem::engine::io {

int64_t TensorView::num_elements() const {
  // Unsigned: a shape like [2^62, 3, 0] has an intermediate product past int64 but a true count of
  // 0, and a non-zero count is bounded by the file size (ParseSafetensors checked it).
  uint64_t n = 1;
  for (int64_t dim : shape) n *= static_cast<uint64_t>(dim);
  return static_cast<int64_t>(n);
}

StatusOr<SafetensorsFile> SafetensorsFile::Open(const std::string& path) {
  ASSIGN_OR_RETURN(MappedFile mapped, MappedFile::Open(path));
  std::span<const std::byte> image = mapped.data();
  ASSIGN_OR_RETURN(SafetensorsLayout layout, ParseSafetensors(image, path));

  SafetensorsFile file;
  file.file_ = std::move(mapped);
  file.metadata_ = std::move(layout.metadata);
  file.tensors_.reserve(layout.tensors.size());
  for (SafetensorsTensorInfo& info : layout.tensors) {
    file.tensors_.push_back(TensorView{std::move(info.name), info.dtype, std::move(info.shape),
                                       image.subspan(info.begin, info.size_bytes())});
  }
  return file;
}

const TensorView* SafetensorsFile::Find(std::string_view name) const {
  auto it = std::lower_bound(tensors_.begin(), tensors_.end(), name,
                             [](const TensorView& t, std::string_view n) { return t.name < n; });
  return it != tensors_.end() && it->name == name ? &*it : nullptr;
}

}  // namespace tandem::engine::io
