#pragma once
// The agent configuration (docs/agent-config.md) the controller renders into the deployment's
// ConfigMap, one document per pool. Pure.
//
// The text is JSON (a subset of YAML, which tandem-agent reads) with sorted keys, so equal
// settings give equal bytes and ContentHash() of it changes exactly when the settings do.

#include <string>
#include <string_view>

#include "controller/reconcile/deployment_spec.h"

namespace tandem::controller::reconcile {

// The ConfigMap holding every pool's config: "<deployment>-config".
std::string ConfigMapName(std::string_view deployment);
// The ConfigMap key of a pool ("prefill.yaml", "decode.yaml", "router.yaml").
std::string ConfigKey(std::string_view role);

// A prefill or decode agent's config.
std::string RenderPoolConfig(std::string_view deployment, const CommonSpec& common, const PoolSpec& pool);

// The router's config: listens on `port`, reads the tokenizer from the model; api.unknownToolCalls
// is written only when it is forward, so a deployment that never sets it keeps its config (and
// its router pods) across controller upgrades.
std::string RenderRouterConfig(std::string_view deployment, const CommonSpec& common, int64_t port,
                               bool forward_unknown_tool_calls);

}  // namespace tandem::controller::reconcile
