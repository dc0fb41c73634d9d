#pragma once
// Internals of Sampler (engine/runtime/sampler.cc): per-thread scratch, top-n selection, argmax,
// log-sum-exp and the truncated draw. Not for use outside the sampler and its tests/benchmark.

#include <bit>
#include <cstdint>
#include <vector>

#include "common/status.h"
#include "engine/runtime/request_types.h"

namespace tandem::engine::runtime {

// Vocabulary-sized buffers reused by every Sample call on one thread (no per-call allocation).
struct SamplerScratch {
  std::vector<float> x;      // [vocab] the working logits
  std::vector<float> w;      // [vocab] unnormalised probabilities exp((x - max) / temperature)
  std::vector<int32_t> idx;  // [vocab] candidate token ids
  std::vector<int32_t> top;  // the top-k candidates, or the nucleus's boundary bucket
  std::vector<double> bucket_mass;
};

// exp(x) for x <= 0 (the sampler only exponentiates x - max): plain float arithmetic, no libm, so
// every platform computes the same bits (the file is built with -ffp-contract=off) and the loops
// over a row vectorise. Relative error below 5e-7 down to x = -87; 0 below that and for -inf.
inline float ExpNonPositive(float x) {
  const bool underflow = !(x >= -87.0f);  // also -inf
  x = underflow ? 0.0f : x;
  // x = n ln2 + r, |r| <= ln2 / 2; n by the 1.5 * 2^23 rounding trick (exact for |n| < 2^22).
  const float n = (x * 1.44269504f + 12582912.0f) - 12582912.0f;
  const float r = (x - n * 0.693359375f) + n * 2.12194440e-4f;
  // Cephes expf minimax polynomial on [-ln2/2, ln2/2].
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const float scale = std::bit_cast<float>((static_cast<int32_t>(n) + 127) << 23);  // 2^n, n in [-126, 0]
  return underflow ? 0.0f : p * scale;
}

// This thread's scratch with x, w and idx sized for `vocab_size`.
SamplerScratch& ThreadSamplerScratch(int64_t vocab_size);

// The ids of the `k` largest entries of x[0, n) (-inf and NaN entries are never selected), largest
// first, ties to the lower id. `out` is overwritten.
void SelectTop(const float* x, int64_t n, int32_t k, std::vector<int32_t>* out);

// The index of the largest entry (ties to the lowest; NaN never wins), or InvalidArgument when all
// are -inf or NaN.
StatusOr<int32_t> Argmax(const float* x, int64_t n);

// log(sum exp(x)) over x[0, n) in double, NaN entries counting as -inf; log(num_pos_inf) when some
// entries are +inf (then the distribution is uniform over those), -inf when none is finite.
// `tmp` ([n] floats) is scratch.
double LogSumExp(const float* x, int64_t n, int64_t num_pos_inf, float* tmp);
// The log-probability of a raw logit `v` given LogSumExp's result.
float RawLogprob(float v, double log_z, int64_t num_pos_inf);

// Draws one token from softmax(x / temperature) truncated by top-k, top-p, min-p (in that order)
// using the uniform number u in [0, 1). REQUIRES: p.temperature > 0, no NaN in x (use -inf).
// InvalidArgument when every entry is -inf.
StatusOr<int32_t> Draw(const float* x, int64_t n, const SamplingParams& p, double u, SamplerScratch* s);

}  // namespace tandem::engine::runtime
