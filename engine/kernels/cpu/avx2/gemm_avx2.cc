// AVX2 + FMA + F16C GEMM kernel (prefill: m > 16). Compiled with -mavx2 -mfma -mf16c -O3.
//
// A 16-row panel of W is dequantized to fp32 [kc, 16] (L1-resident), 4 panels per K step; the
// activations are packed once per call in tiles of 6 rows; a 6x16 register tile of y accumulates
// with broadcast-FMA (12 accumulators).
#include <algorithm>
#include <cstring>

#include <immintrin.h>

#include "engine/formats/float_codecs.h"
#include "engine/kernels/cpu/avx2/simd_avx2.h"
#include "engine/kernels/cpu/matmul_internal.h"

namespace tandem::engine::kernels::cpu::avx2 {

void DecodeRowChunk(const PackedWeight& w, int64_t n, int64_t k0, int64_t kc, float* out) {
  const int64_t k_total = w.cols();
  int64_t k = 0;
  switch (w.format()) {
    case WeightFormat::kBf16: {
      const uint16_t* row = w.bf16() + n * k_total + k0;
      for (; k + 8 <= kc; k += 8) _mm256_storeu_ps(out + k, LoadBf16x8(row + k));
      for (; k < kc; ++k) out[k] = Bf16ToFloat(row[k]);
      break;
    }
    case WeightFormat::kFp8Block128: {
      const uint8_t* row = w.fp8() + n * k_total + k0;
      const float* scale = w.scale() + (n / kFp8BlockSize) * Fp8ScaleCols(k_total) + k0 / kFp8BlockSize;
      for (; k + 16 <= kc; k += 16) {
        const __m256i words = _mm256_slli_epi16(
            _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + k))), 8);
        const __m256i h = HalfFromCodeHigh(words);
        const __m256 s = _mm256_set1_ps(scale[k / kFp8BlockSize] * 256.0f);
        _mm256_storeu_ps(out + k, _mm256_mul_ps(_mm256_cvtph_ps(_mm256_castsi256_si128(h)), s));
        _mm256_storeu_ps(out + k + 8, _mm256_mul_ps(_mm256_cvtph_ps(_mm256_extracti128_si256(h, 1)), s));
      }
      for (; k < kc; ++k) out[k] = Fp8E4M3ToFloat(row[k]) * scale[k / kFp8BlockSize];
      break;
    }
    case WeightFormat::kInt4Group32: {
      const int64_t groups = w.groups();
      const uint8_t* row = w.int4() + n * groups * 16;
      const uint16_t* scale = w.int4_scale() + n * groups;
      // Groups are whole (kc is a multiple of 32 except at the end of K, where the packing pads).
      for (; k < kc; k += 32) {
        const int64_t g = (k0 + k) / 32;
        const __m256 s = _mm256_set1_ps(Bf16ToFloat(scale[g]));
        const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + g * 16));
        const __m128i lo = _mm_and_si128(v, _mm_set1_epi8(0x0f));
        const __m128i hi = _mm_and_si128(_mm_srli_epi16(v, 4), _mm_set1_epi8(0x0f));
        alignas(32) float tmp[32];
        const __m256i eight = _mm256_set1_epi32(8);
        const __m128i parts[4] = {lo, _mm_srli_si128(lo, 8), hi, _mm_srli_si128(hi, 8)};
        for (int q = 0; q < 4; ++q) {
          const __m256i ints = _mm256_sub_epi32(_mm256_cvtepu8_epi32(parts[q]), eight);
          _mm256_store_ps(tmp + 8 * q, _mm256_mul_ps(_mm256_cvtepi32_ps(ints), s));
        }
        std::memcpy(out + k, tmp, sizeof(float) * static_cast<size_t>(std::min<int64_t>(32, kc - k)));
      }
      break;
    }
  }
}

namespace {

constexpr int64_t kPanelRows = 16;      // N per panel: two ymm of fp32
constexpr int64_t kPanelK = 256;        // K per panel: 16 KiB of fp32, L1-resident
constexpr int kTileM = 6;               // activation rows per register tile (12 accumulators)
constexpr int64_t kPanelsPerBlock = 4;  // 64 weight rows dequantized per K step (64 KiB, L2)

// panel[k][j] = W[n0 + j][k0 + k] as fp32 for j < rows (zero beyond).
void DequantizePanel(const PackedWeight& w, int64_t n0, int64_t rows, int64_t k0, int64_t kc, float* panel) {
  if (rows < kPanelRows) std::memset(panel, 0, sizeof(float) * kPanelRows * kc);
  alignas(32) float row[kPanelK];
  for (int64_t j = 0; j < rows; ++j) {
    DecodeRowChunk(w, n0 + j, k0, kc, row);
    for (int64_t k = 0; k < kc; ++k) panel[k * kPanelRows + j] = row[k];
  }
}

// c[r][0..16) (+)= Σ_k a[k][r] * panel[k][0..16) for r < MR. a: packed activations [kc, 6].
template <int MR>
void MicroKernel(const float* a, const float* panel, int64_t kc, float* c, int64_t ldc, bool accumulate) {
  __m256 acc[MR][2];
  for (int r = 0; r < MR; ++r) {
    acc[r][0] = accumulate ? _mm256_loadu_ps(c + r * ldc) : _mm256_setzero_ps();
    acc[r][1] = accumulate ? _mm256_loadu_ps(c + r * ldc + 8) : _mm256_setzero_ps();
  }
  for (int64_t k = 0; k < kc; ++k) {
    const __m256 b0 = _mm256_load_ps(panel + k * kPanelRows);
    const __m256 b1 = _mm256_load_ps(panel + k * kPanelRows + 8);
    for (int r = 0; r < MR; ++r) {
      const __m256 av = _mm256_broadcast_ss(a + k * kTileM + r);
      acc[r][0] = _mm256_fmadd_ps(av, b0, acc[r][0]);
      acc[r][1] = _mm256_fmadd_ps(av, b1, acc[r][1]);
    }
  }
  for (int r = 0; r < MR; ++r) {
    _mm256_storeu_ps(c + r * ldc, acc[r][0]);
    _mm256_storeu_ps(c + r * ldc + 8, acc[r][1]);
  }
}

void RunTile(int mr, const float* a, const float* panel, int64_t kc, float* c, int64_t ldc, bool accumulate) {
  switch (mr) {
    case 1: MicroKernel<1>(a, panel, kc, c, ldc, accumulate); break;
    case 2: MicroKernel<2>(a, panel, kc, c, ldc, accumulate); break;
    case 3: MicroKernel<3>(a, panel, kc, c, ldc, accumulate); break;
    case 4: MicroKernel<4>(a, panel, kc, c, ldc, accumulate); break;
    case 5: MicroKernel<5>(a, panel, kc, c, ldc, accumulate); break;
    default: MicroKernel<6>(a, panel, kc, c, ldc, accumulate); break;
  }
}

}  // namespace

void PackActivations(const float* x, int64_t m, int64_t k_total, float* packed) {
  for (int64_t t = 0; t < m; t += kTileM) {
    float* tile = packed + t * k_total;
    for (int64_t k = 0; k < k_total; ++k) {
      for (int64_t r = 0; r < kTileM; ++r) tile[k * kTileM + r] = t + r < m ? x[(t + r) * k_total + k] : 0.0f;
    }
  }
}

void GemmRows(const PackedWeight& w, const float* packed_x, int64_t m, float* y, int64_t n0, int64_t n1) {
  const int64_t k_total = w.cols(), n_total = w.rows();
  // kPanelsPerBlock panels of 16 rows share each activation tile while it sits in L1.
  alignas(32) static thread_local float panels[kPanelsPerBlock][kPanelRows * kPanelK];
  alignas(32) float edge[kTileM * kPanelRows];
  for (int64_t nb = n0; nb < n1; nb += kPanelRows * kPanelsPerBlock) {
    const int64_t block_rows = std::min(kPanelRows * kPanelsPerBlock, n1 - nb);
    const int64_t num_panels = (block_rows + kPanelRows - 1) / kPanelRows;
    for (int64_t k0 = 0; k0 < k_total; k0 += kPanelK) {
      const int64_t kc = std::min(kPanelK, k_total - k0);
      for (int64_t p = 0; p < num_panels; ++p) {
        DequantizePanel(w, nb + p * kPanelRows, std::min(kPanelRows, block_rows - p * kPanelRows), k0, kc,
                        panels[p]);
      }
      for (int64_t i = 0; i < m; i += kTileM) {
        const int mr = static_cast<int>(std::min<int64_t>(kTileM, m - i));
        const float* a = packed_x + i * k_total + k0 * kTileM;
        for (int64_t p = 0; p < num_panels; ++p) {
          const int64_t rows = std::min(kPanelRows, block_rows - p * kPanelRows);
          float* c = y + i * n_total + nb + p * kPanelRows;
          if (rows == kPanelRows) {
            RunTile(mr, a, panels[p], kc, c, n_total, k0 > 0);
            continue;
          }
          // A partial panel at the end of N: accumulate in a local tile, copy the valid columns.
          for (int r = 0; r < mr; ++r) {
            for (int64_t j = 0; j < kPanelRows; ++j) {
              edge[r * kPanelRows + j] = (k0 > 0 && j < rows) ? c[r * n_total + j] : 0.0f;
            }
          }
          RunTile(mr, a, panels[p], kc, edge, kPanelRows, true);
          for (int r = 0; r < mr; ++r)
            std::memcpy(c + r * n_total, edge + r * kPanelRows, sizeof(float) * rows);
        }
      }
    }
  }
}

}  // namespace tandem::engine::kernels::cpu::avx2
