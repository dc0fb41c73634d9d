#include "engine/model/forward_ops.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace tandem::engine::model {

void SoftmaxInPlace(float* x, int64_t n) {
  float max_v = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < n; ++i) max_v = std::max(max_v, x[i]);
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::isinf(x[i]) && x[i] < 0 ? 0.0f : std::exp(x[i] - max_v);
    sum += x[i];
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

namespace {

// The rotary dimension whose wavelength fits `rotations` turns in `max_pos` positions.
double CorrectionDim(double rotations, int64_t dim, double theta, int64_t max_pos) {
  return dim * std::log(static_cast<double>(max_pos) / (rotations * 2 * M_PI)) / (2 * std::log(theta));
}

}  // namespace

Rope::Rope(const RopeConfig& config, int64_t dim)
    : dim_(dim), interleave_(config.interleave), attention_factor_(config.AttentionFactor()) {
  const int64_t half = dim / 2;
  inv_freq_.resize(half);
  for (int64_t i = 0; i < half; ++i) {
    inv_freq_[i] = 1.0 / std::pow(config.theta, static_cast<double>(2 * i) / static_cast<double>(dim));
  }
  if (!config.yarn) return;
  double low = CorrectionDim(config.beta_fast, dim, config.theta, config.original_max_position_embeddings);
  double high = CorrectionDim(config.beta_slow, dim, config.theta, config.original_max_position_embeddings);
  if (config.truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, static_cast<double>(dim - 1));
  if (low == high) high += 0.001;
  for (int64_t i = 0; i < half; ++i) {
    // ramp 0 keeps the original frequency; ramp 1 divides it by the scaling factor.
    const double ramp = std::clamp((static_cast<double>(i) - low) / (high - low), 0.0, 1.0);
    inv_freq_[i] = inv_freq_[i] / config.factor * ramp + inv_freq_[i] * (1.0 - ramp);
  }
}

void Rope::Apply(float* x, int64_t count, int64_t stride, int64_t pos) const {
  kernels::cpu::ApplyRope(table(), x, count, stride, pos);
}

}  // namespace tandem::engine::model
