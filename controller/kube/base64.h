#pragma once
// Standard base64 (RFC 4648, with padding) for kubeconfig *-data fields and test fixtures.

#include <string>
#include <string_view>

namespace tandem::controller::kube {

// Decodes `text` (whitespace ignored, padding optional). Returns false on any other character or
// a truncated final group; `out` is then unspecified.
bool Base64Decode(std::string_view text, std::string* out);

std::string Base64Encode(std::string_view data);

}  // namespace tandem::controller::kube
