#include "engine/io/safetensors_dtype.h"

#include <array>
#include <utility>

namespace tandem::engine::io {
namespace {

constexpr std::array<std::pair<DType, std::string_view>, 15> kNames = {{
    {DType::kF64, "F64"},
    {DType::kF32, "F32"},
    {DType::kF16, "F16"},
    {DType::kBF16, "BF16"},
    {DType::kF8E4M3, "F8_E4M3"},
    {DType::kF8E5M2, "F8_E5M2"},
    {DType::kI64, "I64"},
    {DType::kI32, "I32"},
    {DType::kI16, "I16"},
    {DType::kI8, "I8"},
    {DType::kU64, "U64"},
    {DType::kU32, "U32"},
    {DType::kU16, "U16"},
    {DType::kU8, "U8"},
    {DType::kBool, "BOOL"},
}};

}  // namespace

std::optional<DType> DTypeFromSafetensorsName(std::string_view name) {
  for (const auto& [dtype, dtype_name] : kNames) {
    if (dtype_name == name) return dtype;
  }
  return std::nullopt;
}

std::string_view SafetensorsDTypeName(DType dtype) {
  for (const auto& [candidate, dtype_name] : kNames) {
    if (candidate == dtype) return dtype_name;
  }
  return "?";
}

}  // namespace tandem::engine::io
