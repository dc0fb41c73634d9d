#pragma once
// JSON parsing for untrusted file headers: never throws, and rejects duplicate object keys (which
// nlohmann/json would otherwise resolve silently by keeping the last one).

#include <string_view>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace tandem::engine::io {

// Parses `text` as one JSON document. Errors are DataLoss: a syntax error (with nlohmann's
// position), or "duplicate key 'k'" for any object, at any depth, that names a key twice.
StatusOr<nlohmann::json> ParseStrictJson(std::string_view text);

}  // namespace tandem::engine::io
