#pragma once
// <immintrin.h> for the AVX-512 kernel files, which are compiled with -mavx512f -mavx512bw
// -mavx512vl -mavx512dq -mavx512vnni -mfma (include only from engine/kernels/cpu/avx512/*.cc).
//
// Only the AVX-512 files include this, so every out-of-line copy of an inline helper below is an
// AVX-512 one, called from AVX-512 code only.
#include <cstdint>

#include "engine/core/immintrin.h"

namespace tandem::engine::kernels::cpu::avx512 {

// The lanes of a 16-lane vector that hold elements: all 16, the first `left`, or none.
inline __mmask16 Mask16(int64_t left) {
  return left >= 16 ? __mmask16(0xffff) : left <= 0 ? __mmask16(0) : __mmask16((1u << left) - 1);
}

}  // namespace tandem::engine::kernels::cpu::avx512
