// The paged MLA decode kernel (mla_decode.h) against its double oracle, in every ISA variant this
// host runs: BF16 and FP8 pages, contexts 1, 17, 97, 300 and 1,025 (across the block sizes), page
// sizes 1, 16 and 64 with pages scattered in a pool, 1, 3 and 8 heads (FP8 rows read in place and
// widened), causal and DSA-masked queries, outputs poisoned around what a call writes; and the
// same bits from both entry points, any thread count and any page size.
#include "engine/kernels/cpu/mla_decode.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "engine/core/thread_pool.h"
#include "engine/formats/float_codecs.h"
#include "engine/kernels/cpu/isa_test_support.h"

namespace tandem::engine::kernels::cpu {
namespace {

constexpr float kPoison = std::numeric_limits<float>::quiet_NaN();
// fp32 scores and sums, ExpF32 (2 ulp) against double.
constexpr double kNmseMlaDecode = 1e-10;

// Every request's rows in pages of `page_tokens`, the pages shuffled through one buffer with
// other bytes between them (as a pool of several layers holds them).
struct Pool {
  std::vector<uint8_t> bytes;
  std::vector<std::vector<const uint8_t*>> pages;  // per request
  RowFormat format;
  int64_t page_tokens, width;
  PagedRows Rows(size_t r) const { return {pages[r].data(), format, page_tokens, width}; }
};

// rows[r]: request r's rows (bf16 bits or e4m3 codes, `width` elements each).
Pool MakePool(const std::vector<std::vector<uint8_t>>& rows, RowFormat format, int64_t page_tokens,
              int64_t width, std::mt19937* rng) {
  Pool p{{}, {}, format, page_tokens, width};
  const int64_t elem = format == RowFormat::kBf16 ? 2 : 1, row_bytes = width * elem;
  const int64_t page_bytes = page_tokens * row_bytes + 40;  // other bytes after each page
  std::vector<std::pair<size_t, int64_t>> owners;           // (request, first row) per page
  for (size_t r = 0; r < rows.size(); ++r) {
    const int64_t n = static_cast<int64_t>(rows[r].size()) / row_bytes;
    for (int64_t t = 0; t < n; t += page_tokens) owners.push_back({r, t});
  }
  std::shuffle(owners.begin(), owners.end(), *rng);
  p.bytes.assign(owners.size() * page_bytes + 8, 0xee);
  std::vector<std::vector<std::pair<int64_t, const uint8_t*>>> found(rows.size());
  for (size_t k = 0; k < owners.size(); ++k) {
    const auto [r, t] = owners[k];
    const int64_t n = std::min(page_tokens, static_cast<int64_t>(rows[r].size()) / row_bytes - t);
    uint8_t* page = p.bytes.data() + 8 + k * page_bytes;
    std::memcpy(page, rows[r].data() + t * row_bytes, n * row_bytes);
    found[r].push_back({t, page});
  }
  p.pages.resize(rows.size());
  for (size_t r = 0; r < rows.size(); ++r) {
    std::sort(found[r].begin(), found[r].end());
    for (const auto& [t, page] : found[r]) p.pages[r].push_back(page);
  }
  return p;
}

std::vector<uint8_t> RandomRows(RowFormat format, int64_t n, int64_t width, std::mt19937* rng) {
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::vector<uint8_t> out(n * width * (format == RowFormat::kBf16 ? 2 : 1));
  if (format == RowFormat::kBf16) {
    for (int64_t i = 0; i < n * width; ++i) {
      const uint16_t b = FloatToBf16(g(*rng));
      std::memcpy(out.data() + 2 * i, &b, 2);
    }
  } else {
    for (uint8_t& c : out) c = FloatToFp8E4M3(g(*rng) * 60.0f);
  }
  return out;
}

// A batch of queries over scattered pages: request r has contexts[r] rows; its query sees all of
// them, or (every third request) only the first 2/3 (a token of a multi-token step) and, every
// fourth, a random DSA mask over them.
struct Batch {
  Pool pool;
  std::vector<float> q_cat;
  std::vector<std::vector<uint8_t>> masks;
  std::vector<MlaQuery> queries;
};

Batch MakeBatch(const std::vector<int64_t>& contexts, RowFormat format, int64_t page_tokens, int64_t heads,
                int64_t width, std::mt19937* rng) {
  Batch b;
  std::vector<std::vector<uint8_t>> rows;
  for (int64_t c : contexts) rows.push_back(RandomRows(format, c, width, rng));
  b.pool = MakePool(rows, format, page_tokens, width, rng);
  std::normal_distribution<float> g(0.0f, 0.2f);
  b.q_cat.resize(contexts.size() * heads * width);
  for (float& v : b.q_cat) v = g(*rng);
  b.masks.resize(contexts.size());
  for (size_t r = 0; r < contexts.size(); ++r) {
    MlaQuery q;
    q.q_cat = b.q_cat.data() + r * heads * width;
    q.rows = b.pool.Rows(r);
    q.context = contexts[r];
    q.visible = r % 3 == 2 ? std::max<int64_t>(1, contexts[r] * 2 / 3) : contexts[r];
    if (r % 4 == 3) {
      b.masks[r].resize(contexts[r]);
      for (uint8_t& m : b.masks[r]) m = (*rng)() % 3 != 0;
      b.masks[r][q.visible - 1] = 1;  // a token always sees itself
    }
    b.queries.push_back(q);
  }
  for (size_t r = 0; r < contexts.size(); ++r)
    b.queries[r].mask = b.masks[r].empty() ? nullptr : b.masks[r].data();
  return b;
}

const char* Name(RowFormat f) { return f == RowFormat::kBf16 ? "bf16" : "fp8_e4m3"; }

TEST(MlaDecodeTest, MatchesTheOracleForBothPageFormats) {
  const uint32_t seed = std::random_device{}();
  std::printf("[mla_decode] seed %u\n", seed);
  std::mt19937 rng(seed);
  const std::vector<int64_t> contexts = {1, 17, 97, 300, 1025};
  const int64_t width = 576, kv_lora = 512;
  ThreadPool pool(2);
  for (RowFormat format : {RowFormat::kBf16, RowFormat::kFp8E4M3}) {
    for (int64_t page_tokens : {1, 16, 64}) {
      for (int64_t heads : {1, 3, 8}) {
        const Batch b = MakeBatch(contexts, format, page_tokens, heads, width, &rng);
        MlaDecodeShape shape;
        shape.heads = heads;
        shape.kv_lora = kv_lora;
        shape.kv_scale = format == RowFormat::kBf16 ? 1.0f : 0.0173f;
        shape.score_scale = 0.0723f * shape.kv_scale;
        const int64_t n = static_cast<int64_t>(b.queries.size()) * heads * kv_lora;
        std::vector<float> want(n);
        MlaDecodeRef(b.queries, shape, want.data());
        ForEachKernelIsa([&](KernelIsa isa) {
          const std::string where = std::string(Name(format)) + " " + KernelIsaName(isa) + " page " +
                                    std::to_string(page_tokens) + " heads " + std::to_string(heads);
          std::vector<float> got(n + 9, kPoison);
          MlaDecode(b.queries, shape, &pool, got.data());
          EXPECT_LE(Nmse(got, want), kNmseMlaDecode) << where;
          for (int64_t i = n; i < n + 9; ++i) ASSERT_TRUE(std::isnan(got[i])) << where << ": wrote " << i;
          // One query at a time on this thread, all heads and then one head at a time: the same bits.
          for (size_t k = 0; k < b.queries.size(); ++k) {
            std::vector<float> all(heads * kv_lora + 3, kPoison);
            MlaDecodeHeads(b.queries[k], heads, shape, all.data());
            ASSERT_EQ(
                std::memcmp(all.data(), got.data() + k * heads * kv_lora, heads * kv_lora * sizeof(float)), 0)
                << where << " query " << k;
            for (int64_t i = heads * kv_lora; i < heads * kv_lora + 3; ++i)
              ASSERT_TRUE(std::isnan(all[i])) << where;
            MlaQuery one = b.queries[k];
            for (int64_t h = 0; h < heads; ++h) {
              one.q_cat = b.queries[k].q_cat + h * width;
              std::vector<float> single(kv_lora);
              MlaDecodeHeads(one, 1, shape, single.data());
              ASSERT_EQ(
                  std::memcmp(single.data(), got.data() + (k * heads + h) * kv_lora, kv_lora * sizeof(float)),
                  0)
                  << where << " query " << k << " head " << h;
            }
          }
        });
      }
    }
  }
}

TEST(MlaDecodeTest, BitsDoNotDependOnThreadsOrPageSize) {
  std::mt19937 rng(7);
  const std::vector<int64_t> contexts = {5, 513, 130};
  const int64_t width = 96, kv_lora = 64, heads = 6;
  MlaDecodeShape shape;
  shape.heads = heads;
  shape.kv_lora = kv_lora;
  shape.score_scale = 0.11f;
  for (RowFormat format : {RowFormat::kBf16, RowFormat::kFp8E4M3}) {
    std::vector<std::vector<uint8_t>> rows;
    for (int64_t c : contexts) rows.push_back(RandomRows(format, c, width, &rng));
    std::vector<float> q_cat(contexts.size() * heads * width);
    std::normal_distribution<float> g(0.0f, 0.3f);
    for (float& v : q_cat) v = g(rng);
    std::vector<float> first;
    for (int64_t page_tokens : {1, 16, 64}) {
      for (int threads : {1, 2, 3}) {
        std::mt19937 shuffle(page_tokens * 10 + threads);
        const Pool pool = MakePool(rows, format, page_tokens, width, &shuffle);
        std::vector<MlaQuery> queries;
        for (size_t r = 0; r < contexts.size(); ++r)
          queries.push_back(
              {q_cat.data() + r * heads * width, pool.Rows(r), contexts[r], contexts[r], nullptr});
        ThreadPool tp(threads);
        std::vector<float> got(contexts.size() * heads * kv_lora);
        MlaDecode(queries, shape, &tp, got.data());
        if (first.empty()) {
          first = got;
          continue;
        }
        ASSERT_EQ(std::memcmp(got.data(), first.data(), got.size() * sizeof(float)), 0)
            << Name(format) << " page " << page_tokens << " threads " << threads;
      }
    }
  }
}

TEST(MlaDecodeTest, BlocksAreSizedFromTheContextAlone) {
  EXPECT_EQ(MlaBlockRows(1), 16);
  EXPECT_EQ(MlaBlocks(1), 1);
  EXPECT_EQ(MlaBlockRows(513), 32);  // 17 blocks of 32 rows
  EXPECT_EQ(MlaBlocks(513), 17);
  for (int64_t c : {1, 17, 97, 512, 513, 1025, 8192, 131072}) {
    EXPECT_EQ(MlaBlockRows(c) % 16, 0) << c;
    EXPECT_LE(MlaBlocks(c), 32) << c;
    EXPECT_GE(MlaBlocks(c) * MlaBlockRows(c), c) << c;
  }
}

}  // namespace
}  // namespace tandem::engine::kernels::cpu
