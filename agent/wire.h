#pragma once
// Conversions between the engine's plain structs and proto/tandem.proto messages. The From*
// functions check what arrives from the network (a peer may be another version, or broken).

#include "agent/generation.h"
#include "common/status.h"
#include "engine/kv/page_convert.h"
#include "engine/runtime/request_types.h"
#include "proto/tandem.pb.h"

namespace tandem::agent {

void ToProto(const engine::runtime::SamplingParams& params, v1::SamplingParams* out);
engine::runtime::SamplingParams FromProto(const v1::SamplingParams& params);

void ToProto(const engine::kv::KvLayout& layout, v1::KvLayout* out);
// InvalidArgument for an unknown dtype, a zero page size, or FP8 scales that are not one per layer.
StatusOr<engine::kv::KvLayout> FromProto(const v1::KvLayout& layout);

void ToProto(const engine::runtime::RequestOutput& output, v1::TokenEvent* out);
// InvalidArgument for an unknown finish reason or logprob lists that do not match the tokens.
StatusOr<StreamEvent> FromProto(const v1::TokenEvent& event);

StatusOr<engine::runtime::FinishReason> ParseFinishReason(std::string_view name);

}  // namespace tandem::agent
