#pragma once
// A scan for JSON nesting before nlohmann/json gets text from the network: its parser and
// destructor are iterative, but copying, comparing and dumping a value recurse once per level, so
// a deep enough document overflows the stack (a 200 KB watch line did, in a release build). Pure.

#include <string_view>

namespace tandem::controller::kube {

// Objects nested deeper than any Kubernetes object needs (kube-apiserver itself refuses 10000);
// a copy of this depth uses well under 1 MiB of stack, under ASan too.
inline constexpr int kMaxJsonDepth = 1000;

// False when `text`, read as JSON, nests arrays and objects deeper than `max_depth` (strings and
// their escapes skipped). Exact for a valid JSON text and for every prefix of one, which is all a
// parser reads before it fails.
bool JsonDepthWithin(std::string_view text, int max_depth = kMaxJsonDepth);

}  // namespace tandem::controller::kube
