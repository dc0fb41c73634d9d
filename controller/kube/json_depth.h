#pragma once
// The nesting the controller accepts in JSON from the network (watch lines, REST responses),
// checked with common/json_depth.h before nlohmann/json recurses into it (a 200 KB watch line of
// brackets overflowed the stack in a release build).

#include "common/json_depth.h"

namespace tandem::controller::kube {

// Deeper than any Kubernetes object needs (kube-apiserver itself refuses 10000); a copy of this
// depth uses well under 1 MiB of stack, under ASan too.
inline constexpr int kMaxJsonDepth = 1000;

}  // namespace tandem::controller::kube
