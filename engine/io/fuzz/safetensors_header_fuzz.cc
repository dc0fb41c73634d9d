// libFuzzer target: arbitrary bytes as a whole safetensors file image. Built with clang by
// scripts/fuzz.sh, not by CMake. Beyond "no crash, no sanitizer report", checks that whatever the
// parser accepts really lies inside the image and does not overlap.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>

#include "engine/io/safetensors_header.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::span<const std::byte> image(reinterpret_cast<const std::byte*>(data), size);
  auto layout = tandem::engine::io::ParseSafetensors(image, "fuzz");
  if (!layout.ok()) return 0;
  for (const auto& t : layout->tensors) {
    if (t.begin < layout->data_offset || t.begin > t.end || t.end > size) std::abort();
    uint64_t bytes = tandem::engine::DTypeBytes(t.dtype);
    for (int64_t dim : t.shape) {
      if (dim < 0) std::abort();
      bytes *= static_cast<uint64_t>(dim);
    }
    if (bytes != t.size_bytes()) std::abort();
    // Touch every byte so ASan would flag a span outside the input.
    uint8_t acc = 0;
    for (uint64_t i = t.begin; i < t.end; ++i) acc ^= data[i];
    volatile uint8_t sink = acc;
    (void)sink;
  }
  return 0;
}
