#include "engine/kernels/cpu/matmul_batch.h"

#include <cstring>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "engine/formats/float_codecs.h"
#include "engine/formats/weights.h"
#include "engine/kernels/cpu/matmul_test_paths.h"

namespace tandem::engine::kernels::cpu {
namespace {

// A random weight in `format`, quantized from fp32 by the checkpoint rules.
PackedWeight MakeWeight(WeightFormat format, int64_t rows, int64_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> gauss(0.0f, 0.05f);
  std::vector<float> w(static_cast<size_t>(rows * cols));
  for (float& v : w) v = gauss(rng);
  StatusOr<PackedWeight> packed = Status::Internal("unset");
  switch (format) {
    case WeightFormat::kBf16: {
      std::vector<uint16_t> bits(w.size());
      for (size_t i = 0; i < w.size(); ++i) bits[i] = FloatToBf16(w[i]);
      packed = PackedWeight::FromBf16({bits.data(), rows, cols});
      break;
    }
    case WeightFormat::kFp8Block128: {
      std::vector<uint8_t> codes(w.size());
      std::vector<float> scale(static_cast<size_t>(Fp8ScaleRows(rows) * Fp8ScaleCols(cols)));
      QuantizeFp8Block128Ref(w.data(), rows, cols, codes.data(), scale.data());
      packed = PackedWeight::FromFp8({codes.data(), scale.data(), rows, cols});
      break;
    }
    case WeightFormat::kInt4Group32: {
      std::vector<int32_t> words(static_cast<size_t>(rows * Int4PackedCols(cols)));
      std::vector<uint16_t> scale(static_cast<size_t>(rows * Int4ScaleCols(cols)));
      QuantizeInt4Group32Ref(w.data(), rows, cols, words.data(), scale.data());
      packed = PackedWeight::FromInt4({words.data(), scale.data(), rows, cols});
      break;
    }
  }
  EXPECT_TRUE(packed.ok()) << packed.status().ToString();
  return std::move(packed).value();
}

std::vector<float> RandomRows(int64_t m, int64_t k, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> gauss(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(m * k));
  for (float& v : x) v = gauss(rng);
  return x;
}

// The tasks of a MoE layer and more: every format, shared and separate activations, decode sizes
// (one ParallelFor) and a prefill size (the GEMM path), row counts that do not divide the grain,
// on every path this CPU runs (a batch splits rows differently from a lone Matmul, so a kernel
// whose row blocks and leftover rows sum in different orders differs here).
TEST(MatmulBatchTest, EveryOutputEqualsItsOwnMatmulBitForBit) {
  const int64_t k = 200;
  const WeightFormat formats[] = {WeightFormat::kBf16, WeightFormat::kFp8Block128,
                                  WeightFormat::kInt4Group32};
  const int64_t rows[] = {16, 37, 130, 5, 64, 256};
  const int64_t ms[] = {1, 1, 3, 16, 20, 1};
  std::vector<PackedWeight> weights;
  std::vector<std::vector<float>> xs;
  for (int i = 0; i < 6; ++i) {
    weights.push_back(MakeWeight(formats[i % 3], rows[i], k, 100 + i));
    xs.push_back(RandomRows(ms[i], k, 200 + i));
  }
  const std::vector<float> shared_x = RandomRows(1, k, 7);
  for (const testing_paths::Path& path : testing_paths::Paths()) {
    SCOPED_TRACE(path.name);
    for (int threads : {1, 2, 3}) {
      ThreadPool pool(threads);
      std::vector<MatmulTask> tasks;
      std::vector<std::vector<float>> got(9), want(9);
      for (int i = 0; i < 9; ++i) {
        // Tasks 6..8 reuse weights 0..2 against one activation row they all share.
        const PackedWeight& w = weights[i < 6 ? i : i - 6];
        const float* x = i < 6 ? xs[i].data() : shared_x.data();
        const int64_t m = i < 6 ? ms[i] : 1;
        got[i].assign(static_cast<size_t>(m * w.rows()), -1.0f);
        want[i].assign(got[i].size(), -2.0f);
        tasks.push_back({&w, x, m, got[i].data()});
        ASSERT_TRUE(Matmul(w, x, m, want[i].data(), &pool, path.options).ok());
      }
      ASSERT_TRUE(MatmulBatch(tasks, &pool, path.options).ok());
      for (int i = 0; i < 9; ++i) {
        ASSERT_EQ(std::memcmp(got[i].data(), want[i].data(), got[i].size() * sizeof(float)), 0)
            << "task " << i << " threads " << threads;
      }
    }
  }
}

TEST(MatmulBatchTest, BadTasksAreErrorsAndComputeNothing) {
  ThreadPool pool(2);
  const PackedWeight w = MakeWeight(WeightFormat::kBf16, 16, 32, 1);
  const std::vector<float> x = RandomRows(1, 32, 2);
  std::vector<float> y(16, 5.0f);
  const MatmulTask good{&w, x.data(), 1, y.data()};
  const MatmulTask bad_m{&w, x.data(), 0, y.data()};
  const MatmulTask null_x{&w, nullptr, 1, y.data()};
  EXPECT_EQ(MatmulBatch(std::vector<MatmulTask>{good, bad_m}, &pool).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(MatmulBatch(std::vector<MatmulTask>{null_x}, &pool).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(MatmulBatch(std::vector<MatmulTask>{good}, nullptr).code(), StatusCode::kInvalidArgument);
  for (float v : y) EXPECT_EQ(v, 5.0f);
  EXPECT_TRUE(MatmulBatch({}, &pool).ok());
}

}  // namespace
}  // namespace tandem::engine::kernels::cpu
