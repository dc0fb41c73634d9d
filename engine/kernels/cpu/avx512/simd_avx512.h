#pragma once
// <immintrin.h> for the AVX-512 kernel files, which are compiled with -mavx512f -mavx512bw
// -mavx512vl -mavx512dq -mavx512vnni -mfma (include only from engine/kernels/cpu/avx512/*.cc).
//
// GCC 12's AVX-512 intrinsics self-initialise their "undefined" operands, which
// -W(maybe-)uninitialized reports wherever they are inlined (GCC bug 105593): silenced for the
// header's lines only. Only the AVX-512 files include this, so every out-of-line copy of an inline
// helper below is an AVX-512 one, called from AVX-512 code only.
#include <cstdint>

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

namespace tandem::engine::kernels::cpu::avx512 {

// The lanes of a 16-lane vector that hold elements: all 16, the first `left`, or none.
inline __mmask16 Mask16(int64_t left) {
  return left >= 16 ? __mmask16(0xffff) : left <= 0 ? __mmask16(0) : __mmask16((1u << left) - 1);
}

}  // namespace tandem::engine::kernels::cpu::avx512
