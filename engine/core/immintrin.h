#pragma once
// <immintrin.h> for files that use AVX-512 intrinsics, whether the whole file is compiled for
// AVX-512 or single functions carry target("avx512...") attributes.
//
// GCC 12's AVX-512 intrinsics self-initialise their "undefined" operands, which
// -W(maybe-)uninitialized reports wherever they are inlined (GCC bug 105593): silenced for the
// header's lines only.
#if defined(__x86_64__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
#endif
