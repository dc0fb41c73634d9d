#include "agent/wire.h"

#include <string>

namespace tandem::agent {

namespace runtime = engine::runtime;
namespace kv = engine::kv;

void ToProto(const runtime::SamplingParams& p, v1::SamplingParams* out) {
  out->set_temperature(p.temperature);
  out->set_top_p(p.top_p);
  out->set_top_k(p.top_k);
  out->set_min_p(p.min_p);
  out->set_repetition_penalty(p.repetition_penalty);
  out->set_frequency_penalty(p.frequency_penalty);
  out->set_presence_penalty(p.presence_penalty);
  if (p.seed) out->set_seed(*p.seed);
  out->set_max_tokens(p.max_tokens);
  for (const std::string& s : p.stop) out->add_stop(s);
  for (int32_t id : p.stop_token_ids) out->add_stop_token_ids(id);
  out->set_logprobs(p.logprobs);
  out->set_min_tokens(p.min_tokens);
  out->set_ignore_eos(p.ignore_eos);
  out->set_keep_special_tokens(!p.skip_special_tokens);
}

runtime::SamplingParams FromProto(const v1::SamplingParams& p) {
  runtime::SamplingParams out;
  out.temperature = p.temperature();
  out.top_p = p.top_p();
  out.top_k = p.top_k();
  out.min_p = p.min_p();
  out.repetition_penalty = p.repetition_penalty();
  out.frequency_penalty = p.frequency_penalty();
  out.presence_penalty = p.presence_penalty();
  if (p.has_seed()) out.seed = p.seed();
  out.max_tokens = p.max_tokens();
  out.stop.assign(p.stop().begin(), p.stop().end());
  out.stop_token_ids.assign(p.stop_token_ids().begin(), p.stop_token_ids().end());
  out.logprobs = p.logprobs();
  out.min_tokens = p.min_tokens();
  out.ignore_eos = p.ignore_eos();
  out.skip_special_tokens = !p.keep_special_tokens();
  return out;  // the engine validates the values (Submit / ReserveImport)
}

void ToProto(const kv::KvLayout& layout, v1::KvLayout* out) {
  out->set_dtype(layout.dtype == engine::KvCacheDtype::kBf16 ? v1::KV_DTYPE_BF16 : v1::KV_DTYPE_FP8_E4M3);
  out->set_page_tokens(static_cast<uint32_t>(layout.page_tokens));
  out->set_num_layers(static_cast<uint32_t>(layout.shape.num_layers));
  out->set_kv_lora_rank(static_cast<uint32_t>(layout.shape.kv_lora_rank));
  out->set_rope_dim(static_cast<uint32_t>(layout.shape.rope_dim));
  out->set_index_head_dim(static_cast<uint32_t>(layout.shape.index_head_dim));
  for (bool b : layout.shape.index_layers) out->add_index_layers(b);
  out->set_page_bytes(layout.page_bytes);
  for (float s : layout.fp8_layer_scales) out->add_fp8_layer_scales(s);
}

StatusOr<kv::KvLayout> FromProto(const v1::KvLayout& in) {
  kv::KvLayout layout;
  switch (in.dtype()) {
    case v1::KV_DTYPE_BF16: layout.dtype = engine::KvCacheDtype::kBf16; break;
    case v1::KV_DTYPE_FP8_E4M3: layout.dtype = engine::KvCacheDtype::kFp8E4M3; break;
    default: return Status::InvalidArgument("layout: unknown KV dtype " + std::to_string(in.dtype()));
  }
  if (in.page_tokens() == 0 || in.num_layers() == 0 || in.page_bytes() == 0) {
    return Status::InvalidArgument("layout: page_tokens, num_layers and page_bytes must be > 0");
  }
  layout.page_tokens = in.page_tokens();
  layout.shape.num_layers = in.num_layers();
  layout.shape.kv_lora_rank = in.kv_lora_rank();
  layout.shape.rope_dim = in.rope_dim();
  layout.shape.index_head_dim = in.index_head_dim();
  if (in.index_layers_size() != 0 && static_cast<uint32_t>(in.index_layers_size()) != in.num_layers()) {
    return Status::InvalidArgument("layout: index_layers must list every layer");
  }
  layout.shape.index_layers.assign(in.index_layers().begin(), in.index_layers().end());
  layout.page_bytes = in.page_bytes();
  if (layout.dtype == engine::KvCacheDtype::kFp8E4M3 &&
      static_cast<uint32_t>(in.fp8_layer_scales_size()) != in.num_layers()) {
    return Status::InvalidArgument("layout: an FP8 layout needs one scale per layer");
  }
  layout.fp8_layer_scales.assign(in.fp8_layer_scales().begin(), in.fp8_layer_scales().end());
  return layout;
}

void ToProto(const runtime::RequestOutput& output, v1::TokenEvent* out) {
  for (int32_t t : output.new_tokens) out->add_token_ids(t);
  for (float l : output.new_token_logprobs) out->add_logprobs(l);
  for (const auto& top : output.top_logprobs) {
    v1::TopLogprobs* t = out->add_top_logprobs();
    for (const runtime::TokenLogprob& tl : top) {
      t->add_token_ids(tl.token);
      t->add_logprobs(tl.logprob);
    }
  }
  out->set_text(output.text_delta);
  if (output.finish) out->set_finish_reason(std::string(runtime::FinishReasonName(*output.finish)));
  out->set_finish_detail(output.finish_detail);
}

StatusOr<runtime::FinishReason> ParseFinishReason(std::string_view name) {
  for (runtime::FinishReason r :
       {runtime::FinishReason::kStop, runtime::FinishReason::kLength, runtime::FinishReason::kAbort,
        runtime::FinishReason::kCancelled, runtime::FinishReason::kRejected}) {
    if (name == runtime::FinishReasonName(r)) return r;
  }
  return Status::InvalidArgument("unknown finish reason '" + std::string(name) + "'");
}

StatusOr<StreamEvent> FromProto(const v1::TokenEvent& in) {
  StreamEvent event;
  event.piece.tokens.assign(in.token_ids().begin(), in.token_ids().end());
  if (in.logprobs_size() != 0 && in.logprobs_size() != in.token_ids_size()) {
    return Status::InvalidArgument("token event: logprobs do not match the tokens");
  }
  if (in.top_logprobs_size() != 0 && in.top_logprobs_size() != in.token_ids_size()) {
    return Status::InvalidArgument("token event: top_logprobs do not match the tokens");
  }
  event.piece.logprobs.assign(in.logprobs().begin(), in.logprobs().end());
  for (const v1::TopLogprobs& top : in.top_logprobs()) {
    if (top.token_ids_size() != top.logprobs_size()) {
      return Status::InvalidArgument("token event: a top_logprobs entry is ragged");
    }
    std::vector<runtime::TokenLogprob>& row = event.piece.top_logprobs.emplace_back();
    for (int i = 0; i < top.token_ids_size(); ++i) row.push_back({top.token_ids(i), top.logprobs(i)});
  }
  event.piece.text = in.text();
  if (!in.finish_reason().empty()) {
    ASSIGN_OR_RETURN(event.finish, ParseFinishReason(in.finish_reason()));
  }
  event.finish_detail = in.finish_detail();
  return event;
}

}  // namespace tandem::agent
