#pragma once
// The dtype names of the safetensors format ("F32", "BF16", "F8_E4M3", ...) and engine::DType.

#include <optional>
#include <string_view>

#include "engine/core/dtype.h"

namespace tandem::engine::io {

// The DType a safetensors dtype name denotes, or nullopt for a name the engine does not handle
// (e.g. "F8_E8M0", "F4", "C64").
std::optional<DType> DTypeFromSafetensorsName(std::string_view name);

// The safetensors name of `dtype`: DType::kBF16 -> "BF16".
std::string_view SafetensorsDTypeName(DType dtype);

}  // namespace tandem::engine::io
