#pragma once
// Test inputs shared by the expanded MLA attention tests (kernels/cpu/mla_prefill_test.cc and its
// CUDA twin's, kernels/cuda/mla_prefill_cuda_test.cc): one request's step with random queries, keys,
// values and latent rows, an optional DSA mask, and the double oracle's answer.

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "engine/kernels/cpu/mla_prefill.h"

namespace tandem::engine::kernels::cpu {

inline MlaPrefillShape PrefillShape(int64_t heads, int64_t nope, int64_t rope, int64_t v, float scale) {
  MlaPrefillShape s;
  s.heads = heads;
  s.nope = nope;
  s.rope = rope;
  s.v = v;
  s.scale = scale;
  return s;
}

// One request's step: its queries, the keys and values of its context, the latent rows whose
// rotary part the keys share (lora + rope wide, as the caller passes them), uniform in [-1, 1];
// masked: a DSA mask keeping about 2 keys in 3, in which query 1 (when there are > 2) sees none.
struct MlaPrefillCase {
  MlaPrefillShape shape;
  int64_t past = 0, num_new = 0, lora = 0;
  std::vector<float> q, kv, lat;
  std::vector<uint8_t> mask;

  MlaPrefillCase(MlaPrefillShape s, int64_t past_tokens, int64_t new_tokens, bool masked, uint32_t seed,
                 int64_t lora_rank = 5)
      : shape(s), past(past_tokens), num_new(new_tokens), lora(lora_rank) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    const int64_t context = past + num_new;
    q.resize(num_new * s.heads * (s.nope + s.rope));
    kv.resize(context * s.heads * (s.nope + s.v));
    lat.resize(context * (lora + s.rope));
    for (float& x : q) x = u(rng);
    for (float& x : kv) x = u(rng);
    for (float& x : lat) x = u(rng);
    if (!masked) return;
    mask.resize(num_new * context);
    for (uint8_t& b : mask) b = rng() % 3 != 0;
    if (num_new > 2) std::fill_n(mask.begin() + context, context, 0);  // query 1 sees no key
  }

  bool masked() const { return !mask.empty(); }
  int64_t OutFloats() const { return num_new * shape.heads * shape.v; }
  MlaPrefillInput Input() const {
    MlaPrefillInput in;
    in.q = q.data();
    in.kv = kv.data();
    in.k_rope = lat.data() + lora;
    in.k_rope_stride = lora + shape.rope;
    in.past = past;
    in.num_new = num_new;
    in.mask = masked() ? mask.data() : nullptr;
    return in;
  }
  std::vector<float> Ref() const {
    std::vector<float> out(OutFloats());
    MlaPrefillRef(Input(), shape, out.data());
    return out;
  }
  std::string Name() const {
    return "heads " + std::to_string(shape.heads) + " nope " + std::to_string(shape.nope) + " v " +
           std::to_string(shape.v) + " past " + std::to_string(past) + " new " + std::to_string(num_new) +
           (masked() ? " masked" : " causal");
  }
};

}  // namespace tandem::engine::kernels::cpu
