#pragma once
// Element types and the precision names users write in a ModelDeployment.

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "common/status.h"

namespace tandem::engine {

// Storage element types the engine moves around.
// Enumerators are only ever appended: the first seven were the original set.
enum class DType : uint8_t {
  kF32,
  kF16,
  kBF16,
  kF8E4M3,
  kF8E5M2,
  kI32,
  kU8,
  kF64,
  kI64,
  kI16,
  kI8,
  kBool,  // one byte per element, 0 or 1
  kU16,
  kU32,
  kU64,
};

constexpr size_t DTypeBytes(DType t) {
  switch (t) {
    case DType::kF32: return 4;
    case DType::kF16: return 2;
    case DType::kBF16: return 2;
    case DType::kF8E4M3: return 1;
    case DType::kF8E5M2: return 1;
    case DType::kI32: return 4;
    case DType::kU8: return 1;
    case DType::kF64: return 8;
    case DType::kI64: return 8;
    case DType::kI16: return 2;
    case DType::kI8: return 1;
    case DType::kBool: return 1;
    case DType::kU16: return 2;
    case DType::kU32: return 4;
    case DType::kU64: return 8;
  }
  return 0;
}

constexpr std::string_view DTypeName(DType t) {
  switch (t) {
    case DType::kF32: return "f32";
    case DType::kF16: return "f16";
    case DType::kBF16: return "bf16";
    case DType::kF8E4M3: return "f8_e4m3";
    case DType::kF8E5M2: return "f8_e5m2";
    case DType::kI32: return "i32";
    case DType::kU8: return "u8";
    case DType::kF64: return "f64";
    case DType::kI64: return "i64";
    case DType::kI16: return "i16";
    case DType::kI8: return "i8";
    case DType::kBool: return "bool";
    case DType::kU16: return "u16";
    case DType::kU32: return "u32";
    case DType::kU64: return "u64";
  }
  return "?";
}

// Weight precision of a pool: `weights: bf16|fp8|int4`.
enum class WeightFormat : uint8_t { kBf16, kFp8Block128, kInt4Group32 };
// KV cache precision of a pool: `kvCache: bf16|fp8_e4m3`.
enum class KvCacheDtype : uint8_t { kBf16, kFp8E4M3 };

constexpr std::string_view WeightFormatName(WeightFormat f) {
  switch (f) {
    case WeightFormat::kBf16: return "bf16";
    case WeightFormat::kFp8Block128: return "fp8";
    case WeightFormat::kInt4Group32: return "int4";
  }
  return "?";
}

constexpr std::string_view KvCacheDtypeName(KvCacheDtype d) {
  return d == KvCacheDtype::kBf16 ? "bf16" : "fp8_e4m3";
}

inline StatusOr<WeightFormat> ParseWeightFormat(std::string_view name) {
  for (WeightFormat f : {WeightFormat::kBf16, WeightFormat::kFp8Block128, WeightFormat::kInt4Group32}) {
    if (name == WeightFormatName(f)) return f;
  }
  return Status::InvalidArgument("unknown weight format '" + std::string(name) +
                                 "' (expected bf16, fp8 or int4)");
}

inline StatusOr<KvCacheDtype> ParseKvCacheDtype(std::string_view name) {
  for (KvCacheDtype d : {KvCacheDtype::kBf16, KvCacheDtype::kFp8E4M3}) {
    if (name == KvCacheDtypeName(d)) return d;
  }
  return Status::InvalidArgument("unknown KV cache dtype '" + std::string(name) +
                                 "' (expected bf16 or fp8_e4m3)");
}

// Bytes one token occupies in one layer of the MLA latent cache (kv_lora + rope values).
constexpr size_t KvBytesPerTokenLayer(KvCacheDtype d, size_t kv_lora_rank = 512, size_t rope_dim = 64) {
  return (kv_lora_rank + rope_dim) * (d == KvCacheDtype::kBf16 ? 2 : 1);
}

}  // namespace tandem::engine
