#include <cstring>
#include <string>

#include "engine/kernels/cpu/matmul.h"

namespace tandem::engine::kernels::cpu {
namespace {

Status CheckShape(int64_t rows, int64_t cols, const void* data) {
  if (rows < 1 || cols < 1) {
    return Status::InvalidArgument("weight shape [" + std::to_string(rows) + ", " + std::to_string(cols) +
                                   "] must be positive");
  }
  if (data == nullptr) return Status::InvalidArgument("weight data is null");
  return Status::Ok();
}

}  // namespace

StatusOr<PackedWeight> PackedWeight::FromBf16(const Bf16WeightView& w) {
  RETURN_IF_ERROR(CheckShape(w.rows, w.cols, w.data));
  PackedWeight p;
  p.format_ = WeightFormat::kBf16;
  p.rows_ = w.rows;
  p.cols_ = w.cols;
  p.bf16_ = AlignedBuffer<uint16_t>(w.data, static_cast<size_t>(w.rows * w.cols));
  return p;
}

StatusOr<PackedWeight> PackedWeight::FromFp8(const Fp8BlockWeightView& w) {
  RETURN_IF_ERROR(CheckShape(w.rows, w.cols, w.data));
  if (w.scale_inv == nullptr) return Status::InvalidArgument("fp8 weight has no weight_scale_inv");
  PackedWeight p;
  p.format_ = WeightFormat::kFp8Block128;
  p.rows_ = w.rows;
  p.cols_ = w.cols;
  p.fp8_ = AlignedBuffer<uint8_t>(w.data, static_cast<size_t>(w.rows * w.cols));
  p.scale_ =
      AlignedBuffer<float>(w.scale_inv, static_cast<size_t>(Fp8ScaleRows(w.rows) * Fp8ScaleCols(w.cols)));
  return p;
}

StatusOr<PackedWeight> PackedWeight::FromInt4(const Int4GroupWeightView& w) {
  RETURN_IF_ERROR(CheckShape(w.rows, w.cols, w.packed));
  if (w.scale == nullptr) return Status::InvalidArgument("int4 weight has no weight_scale");
  PackedWeight p;
  p.format_ = WeightFormat::kInt4Group32;
  p.rows_ = w.rows;
  p.cols_ = w.cols;
  const int64_t groups = p.groups(), packed_cols = Int4PackedCols(w.cols);
  p.int4_ = AlignedBuffer<uint8_t>(static_cast<size_t>(w.rows * groups * 16));
  std::memset(p.int4_.data(), 0x88, p.int4_.size());  // padding: q = 0 in both nibbles
  p.int4_scale_ = AlignedBuffer<uint16_t>(w.scale, static_cast<size_t>(w.rows * groups));
  const int64_t full_groups = w.cols / kInt4GroupSize;
  for (int64_t n = 0; n < w.rows; ++n) {
    const uint32_t* src = reinterpret_cast<const uint32_t*>(w.packed + n * packed_cols);
    uint8_t* dst = p.int4_.data() + n * groups * 16;
    // Whole groups a word pair at a time (loading speed: this runs over every expert weight):
    // lo holds elements 0..15 of the group, hi 16..31, element j of each at bits [4j, 4j+4).
    for (int64_t g = 0; g < full_groups; ++g) {
      const uint64_t lo = src[4 * g] | static_cast<uint64_t>(src[4 * g + 1]) << 32;
      const uint64_t hi = src[4 * g + 2] | static_cast<uint64_t>(src[4 * g + 3]) << 32;
      for (int i = 0; i < 16; ++i) {
        dst[g * 16 + i] = static_cast<uint8_t>(((lo >> (4 * i)) & 0xfu) | (((hi >> (4 * i)) & 0xfu) << 4));
      }
    }
    for (int64_t k = full_groups * kInt4GroupSize; k < w.cols; ++k) {
      const uint8_t nib = static_cast<uint8_t>((src[k / 8] >> (4 * (k % 8))) & 0xfu);
      const int64_t g = k / 32, i = k % 32;
      uint8_t& byte = dst[g * 16 + (i % 16)];
      byte = i < 16 ? static_cast<uint8_t>((byte & 0xf0) | nib)
                    : static_cast<uint8_t>((byte & 0x0f) | (nib << 4));
    }
  }
  return p;
}

StatusOr<PackedWeight> PackedWeight::Slice(int64_t r0, int64_t r1, int64_t c0, int64_t c1) const {
  const std::string what = "slice rows [" + std::to_string(r0) + ", " + std::to_string(r1) + ") cols [" +
                           std::to_string(c0) + ", " + std::to_string(c1) + ") of a [" +
                           std::to_string(rows_) + ", " + std::to_string(cols_) + "] " +
                           std::string(WeightFormatName(format_)) + " weight";
  if (r0 < 0 || r1 > rows_ || r0 >= r1 || c0 < 0 || c1 > cols_ || c0 >= c1) {
    return Status::InvalidArgument(what + ": empty or out of range");
  }
  auto on_grid = [](int64_t at, int64_t block, int64_t end) { return at % block == 0 || at == end; };
  if (format_ == WeightFormat::kFp8Block128 &&
      !(on_grid(r0, kFp8BlockSize, rows_) && on_grid(r1, kFp8BlockSize, rows_) &&
        on_grid(c0, kFp8BlockSize, cols_) && on_grid(c1, kFp8BlockSize, cols_))) {
    return Status::InvalidArgument(what + ": fp8 shards must fall on its 128 x 128 scale blocks");
  }
  if (format_ == WeightFormat::kInt4Group32 &&
      !(on_grid(c0, kInt4GroupSize, cols_) && on_grid(c1, kInt4GroupSize, cols_))) {
    return Status::InvalidArgument(what + ": int4 shards must fall on its 32-column groups");
  }
  const int64_t n = r1 - r0, k = c1 - c0;
  PackedWeight p;
  p.format_ = format_;
  p.rows_ = n;
  p.cols_ = k;
  switch (format_) {
    case WeightFormat::kBf16:
      p.bf16_ = AlignedBuffer<uint16_t>(static_cast<size_t>(n * k));
      for (int64_t r = 0; r < n; ++r)
        std::memcpy(p.bf16_.data() + r * k, bf16_.data() + (r0 + r) * cols_ + c0, static_cast<size_t>(k) * 2);
      break;
    case WeightFormat::kFp8Block128: {
      p.fp8_ = AlignedBuffer<uint8_t>(static_cast<size_t>(n * k));
      for (int64_t r = 0; r < n; ++r)
        std::memcpy(p.fp8_.data() + r * k, fp8_.data() + (r0 + r) * cols_ + c0, static_cast<size_t>(k));
      const int64_t sr = Fp8ScaleRows(n), sc = Fp8ScaleCols(k), src_cols = Fp8ScaleCols(cols_);
      p.scale_ = AlignedBuffer<float>(static_cast<size_t>(sr * sc));
      for (int64_t br = 0; br < sr; ++br)
        for (int64_t bc = 0; bc < sc; ++bc)
          p.scale_.data()[br * sc + bc] =
              scale_.data()[(r0 / kFp8BlockSize + br) * src_cols + c0 / kFp8BlockSize + bc];
      break;
    }
    case WeightFormat::kInt4Group32: {
      const int64_t g = p.groups(), src_g = groups(), g0 = c0 / kInt4GroupSize;
      p.int4_ = AlignedBuffer<uint8_t>(static_cast<size_t>(n * g * 16));
      p.int4_scale_ = AlignedBuffer<uint16_t>(static_cast<size_t>(n * g));
      for (int64_t r = 0; r < n; ++r) {
        std::memcpy(p.int4_.data() + r * g * 16, int4_.data() + ((r0 + r) * src_g + g0) * 16,
                    static_cast<size_t>(g) * 16);
        std::memcpy(p.int4_scale_.data() + r * g, int4_scale_.data() + (r0 + r) * src_g + g0,
                    static_cast<size_t>(g) * 2);
      }
      // A slice ending inside the last group of the source (c1 == cols_ off the grid) carries that
      // group's padding as it was: q = 0.
      break;
    }
  }
  return p;
}

int64_t PackedWeight::StreamedBytes() const {
  switch (format_) {
    case WeightFormat::kBf16: return static_cast<int64_t>(bf16_.size() * 2);
    case WeightFormat::kFp8Block128: return static_cast<int64_t>(fp8_.size() + scale_.size() * 4);
    case WeightFormat::kInt4Group32: return static_cast<int64_t>(int4_.size() + int4_scale_.size() * 2);
  }
  return 0;
}

}  // namespace tandem::engine::kernels::cpu
