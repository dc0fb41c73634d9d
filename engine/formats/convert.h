#pragma once
// Bulk conversions between the KV cache's storage types, with the per-tensor scale of an FP8
// cache (stored = value / scale, value = stored * scale). These are the CPU reference twins of
// the CUDA kernels in engine/formats/cuda/convert_cuda.h, bit for bit.

#include <cstddef>
#include <cstdint>

namespace tandem::engine {

// out[i] = e4m3(bf16(in[i]) * inv_scale), saturating at ±448.
// in: [n] bf16 bits; out: [n] fp8 e4m3 codes. inv_scale = 1 / scale, > 0.
void ConvertBf16ToFp8E4M3Ref(const uint16_t* in, uint8_t* out, size_t n, float inv_scale);

// The same output as ConvertBf16ToFp8E4M3Ref, bit for bit, 16 values a step with AVX-512 and 8
// with AVX2 (integer rounding on the fp32 bits; the subnormal range through cvtps2dq, round to
// nearest even as rintf): the KV cache's FP8 writes and the transfer's BF16 -> FP8 pages.
void ConvertBf16ToFp8E4M3(const uint16_t* in, uint8_t* out, size_t n, float inv_scale);

// out[i] = bf16(e4m3(in[i]) * scale). in: [n] fp8 e4m3 codes; out: [n] bf16 bits.
void ConvertFp8E4M3ToBf16Ref(const uint8_t* in, uint16_t* out, size_t n, float scale);

// The same output as ConvertFp8E4M3ToBf16Ref through a 256-entry table built per call: for reads
// of more than a few hundred values (the KV cache's page reads).
void ConvertFp8E4M3ToBf16(const uint8_t* in, uint16_t* out, size_t n, float scale);

// Tests: the conversions above take no variant wider than `widest` from now on (kAvx512: no
// limit), so that every variant runs on one machine. Not for use while other threads convert.
enum class ConvertIsa { kPortable, kAvx2, kAvx512 };
void LimitConvertIsaForTesting(ConvertIsa widest);
// Whether this host runs `isa`'s converters (tests skip, naming it, what it cannot run).
bool ConvertHostRuns(ConvertIsa isa);
// The widest variant the converters take now (host, test limit and TANDEM_ISA ceiling): logs.
ConvertIsa ActiveConvertIsa();

// The per-tensor scale that maps max|x| onto the E4M3 finite maximum (1.0 for an all-zero input).
// in: [n] bf16 bits.
float Fp8E4M3ScaleForBf16(const uint16_t* in, size_t n);

}  // namespace tandem::engine
