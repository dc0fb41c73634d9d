#pragma once
// Pieces of the forward pass kept on the host side: softmax and YaRN RoPE (RMSNorm, LayerNorm and
// SwiGLU's activation are kernels: engine/kernels/cpu/row_ops.h, run through kernels::Backend).

#include <cstdint>
#include <vector>

#include "engine/kernels/cpu/row_ops.h"
#include "engine/model/model_config.h"

namespace tandem::engine::model {

// In-place softmax over n values; entries equal to -inf get probability 0. REQUIRES: at least
// one finite entry.
void SoftmaxInPlace(float* x, int64_t n);

// RoPE over `dim` rotary values with YaRN scaling, as DeepSeek-V3 / GLM define it: frequency i
// blends theta^(-2i/dim) (ramp 0, extrapolation) and theta^(-2i/dim) / factor (ramp 1) over the
// correction range of beta_fast..beta_slow rotations in original_max_position_embeddings; cos and
// sin are multiplied by RopeConfig::AttentionFactor().
class Rope {
 public:
  Rope(const RopeConfig& config, int64_t dim);

  int64_t dim() const { return dim_; }
  const std::vector<double>& inv_freq() const { return inv_freq_; }  // [dim / 2]
  double attention_factor() const { return attention_factor_; }

  // Rotates `count` vectors of `dim` values, vector j at x + j * stride, all at position `pos`.
  // Interleaved (DeepSeek/GLM checkpoints): pairs (2i, 2i+1) rotate by pos * inv_freq[i];
  // otherwise rotate_half: pairs (i, i + dim/2).
  void Apply(float* x, int64_t count, int64_t stride, int64_t pos) const;
  // The frequencies as the kernels take them (valid while this Rope lives).
  kernels::cpu::RopeTable table() const { return {inv_freq_.data(), dim_, interleave_, attention_factor_}; }

 private:
  int64_t dim_;
  bool interleave_;
  double attention_factor_;
  std::vector<double> inv_freq_;
};

}  // namespace tandem::engine::model
