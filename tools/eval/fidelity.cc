#include "tools/eval/fidelity.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>

#include "engine/kv/page_convert.h"
#include "engine/model/forward.h"
#include "engine/model/loader.h"
#include "engine/model/requantize.h"
#include "engine/runtime/serving_engine.h"

namespace tandem::tools::eval {
namespace {

using engine::KvCacheDtype;
using engine::WeightFormat;
namespace model = engine::model;
namespace runtime = engine::runtime;

constexpr size_t kPageTokens = 16;
constexpr size_t kPerplexityChunk = 16;

// One engine: the checkpoint's weights in one format over a KV pool of one dtype. An FP8 pool
// fixes its per-layer scales at open, as a decode pool does. Sequences are laid out on pages
// 0, 1, ... of the pool: one sequence at a time.
class Side {
 public:
  static StatusOr<std::unique_ptr<Side>> Open(const std::string& model_dir, WeightFormat weights,
                                              KvCacheDtype kv, size_t kv_tokens, int threads) {
    auto side = std::unique_ptr<Side>(new Side());
    ASSIGN_OR_RETURN(side->weights_, model::LoadModel(model_dir));
    engine::ThreadPool workers(threads > 0 ? threads : 2);
    RETURN_IF_ERROR(model::RequantizeModel(&side->weights_, weights, &workers));
    runtime::ServingConfig sc;
    sc.model_weights = &side->weights_;
    sc.kv_dtype = kv;
    sc.kv_tokens = kv_tokens;
    sc.page_tokens = kPageTokens;
    sc.threads = threads;
    sc.role = kv == KvCacheDtype::kFp8E4M3 ? runtime::EngineRole::kDecodeOnly : runtime::EngineRole::kUnified;
    ASSIGN_OR_RETURN(side->serving_, runtime::ServingEngine::Open(sc));
    side->vocab_ = side->weights_.config.vocab_size;
    return side;
  }

  int64_t vocab() const { return vocab_; }
  engine::kv::PagePool& pool() { return serving_->kv_pool(); }

  // A fresh sequence over the pool's first pages, room for `tokens`.
  model::KvSequence Fresh(size_t tokens) const {
    model::KvSequence seq;
    for (size_t p = 0; p < runtime::KvPagesForTokens(tokens, kPageTokens); ++p)
      seq.pages.push_back(static_cast<engine::kv::PageId>(p));
    return seq;
  }

  // Appends `tokens` to `seq` (in chunks of `chunk`, 0: one step); logits [tokens, vocab].
  Status Feed(model::KvSequence* seq, std::span<const int32_t> tokens, size_t chunk,
              std::vector<float>* logits) {
    logits->clear();
    for (size_t done = 0; done < tokens.size();) {
      const size_t n = chunk == 0 ? tokens.size() : std::min(chunk, tokens.size() - done);
      const model::StepInput in{seq, tokens.subspan(done, n)};
      std::vector<float> step;
      RETURN_IF_ERROR(serving_->runner().Forward(std::span<const model::StepInput>(&in, 1), {}, &step));
      logits->insert(logits->end(), step.begin(), step.end());
      done += n;
    }
    return Status::Ok();
  }

 private:
  Side() = default;
  model::ModelWeights weights_;
  std::unique_ptr<runtime::ServingEngine> serving_;
  int64_t vocab_ = 0;
};

int32_t Argmax(const float* row, int64_t n) {
  return static_cast<int32_t>(std::max_element(row, row + n) - row);
}

// KL(softmax(p) || softmax(q)), in double.
double Kl(const float* p, const float* q, int64_t n) {
  const double pm = *std::max_element(p, p + n), qm = *std::max_element(q, q + n);
  double ps = 0, qs = 0;
  for (int64_t i = 0; i < n; ++i) {
    ps += std::exp(p[i] - pm);
    qs += std::exp(q[i] - qm);
  }
  const double lp = std::log(ps), lq = std::log(qs);
  double kl = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double log_p = p[i] - pm - lp, log_q = q[i] - qm - lq;
    kl += std::exp(log_p) * (log_p - log_q);
  }
  return std::max(0.0, kl);
}

// What one configuration produced on one prompt: logits on the prompt and on the reference's
// continuation (teacher-forced), and its own greedy continuation.
struct Run {
  std::vector<float> logits;  // [prompt + continuation, vocab]
  std::vector<int32_t> greedy;
};

// Prefill on `pre`, decode on `dec` (the same Side unless split: then the prefill's pages are
// converted into the decode pool's layout, as a transfer does).
class Pipeline {
 public:
  Pipeline(Side* pre, Side* dec) : pre_(pre), dec_(dec) {}

  // Teacher-forced over `forced` after the prompt (forced empty: the greedy continuation of
  // `steps` tokens is written to run->greedy instead).
  Status Go(const std::vector<int32_t>& prompt, const std::vector<int32_t>& forced, int steps, Run* run) {
    const int64_t vocab = pre_->vocab();
    const size_t room = prompt.size() + static_cast<size_t>(steps) + 1;
    model::KvSequence seq = pre_->Fresh(room);
    std::vector<float> logits;
    RETURN_IF_ERROR(pre_->Feed(&seq, prompt, 0, &logits));
    if (pre_ != dec_) RETURN_IF_ERROR(Transfer(&seq, room));
    run->logits = logits;
    run->greedy.clear();
    int32_t next = Argmax(logits.data() + (prompt.size() - 1) * vocab, vocab);
    for (int s = 0; s < steps; ++s) {
      const int32_t fed = forced.empty() ? next : forced[static_cast<size_t>(s)];
      run->greedy.push_back(next);
      RETURN_IF_ERROR(dec_->Feed(&seq, std::span<const int32_t>(&fed, 1), 0, &logits));
      run->logits.insert(run->logits.end(), logits.begin(), logits.end());
      next = Argmax(logits.data(), vocab);
    }
    return Status::Ok();
  }

 private:
  Status Transfer(model::KvSequence* seq, size_t room) {
    if (!converter_) {
      ASSIGN_OR_RETURN(const engine::kv::KvLayout target, engine::kv::LayoutOf(dec_->pool()));
      ASSIGN_OR_RETURN(converter_, engine::kv::PageConverter::Create(pre_->pool(), target));
    }
    model::KvSequence to = dec_->Fresh(room);
    const size_t tokens = static_cast<size_t>(seq->num_tokens);
    for (size_t p = 0; p * kPageTokens < tokens; ++p) {
      const size_t valid = std::min(kPageTokens, tokens - p * kPageTokens);
      RETURN_IF_ERROR(converter_->Convert(seq->pages[p], valid, dec_->pool().PageBytes(to.pages[p])));
    }
    to.num_tokens = seq->num_tokens;
    *seq = std::move(to);
    return Status::Ok();
  }

  Side* pre_;
  Side* dec_;
  std::unique_ptr<engine::kv::PageConverter> converter_;
};

StatusOr<double> Perplexity(Side* side, const std::vector<int32_t>& text, size_t window) {
  const int64_t vocab = side->vocab();
  double nll = 0;
  int64_t n = 0;
  for (size_t start = 0; start + 1 < text.size(); start += window) {
    const size_t len = std::min(window, text.size() - start);
    if (len < 2) break;
    model::KvSequence seq = side->Fresh(len);
    std::vector<float> logits;
    RETURN_IF_ERROR(
        side->Feed(&seq, std::span<const int32_t>(text).subspan(start, len), kPerplexityChunk, &logits));
    for (size_t t = 0; t + 1 < len; ++t) {
      const float* row = logits.data() + t * vocab;
      const double m = *std::max_element(row, row + vocab);
      double s = 0;
      for (int64_t i = 0; i < vocab; ++i) s += std::exp(row[i] - m);
      nll += m + std::log(s) - row[text[start + t + 1]];
      ++n;
    }
  }
  return n == 0 ? 0.0 : std::exp(nll / static_cast<double>(n));
}

}  // namespace

std::vector<FidelityConfig> FidelityConfigs() {
  const WeightFormat b = WeightFormat::kBf16, f = WeightFormat::kFp8Block128, i = WeightFormat::kInt4Group32;
  const KvCacheDtype kb = KvCacheDtype::kBf16, kf = KvCacheDtype::kFp8E4M3;
  return {{"bf16", b, kb, b, kb},       {"fp8-kv", b, kf, b, kf}, {"fp8", f, kb, f, kb},
          {"fp8+fp8-kv", f, kf, f, kf}, {"int4", i, kb, i, kb},   {"int4+fp8-kv", i, kf, i, kf},
          {"pd-split", f, kb, i, kf}};
}

StatusOr<std::vector<FidelityRow>> RunFidelity(const FidelityOptions& o) {
  if (o.prompts.empty()) return Status::InvalidArgument("fidelity: no prompts");
  size_t longest = o.text.empty() ? 0 : static_cast<size_t>(o.perplexity_window);
  for (const auto& p : o.prompts) {
    if (p.empty()) return Status::InvalidArgument("fidelity: an empty prompt");
    longest = std::max(longest, p.size() + static_cast<size_t>(o.continuation_tokens) + 1);
  }
  std::vector<FidelityConfig> configs;
  for (const FidelityConfig& c : FidelityConfigs()) {
    if (o.configs.empty() || c.name == "bf16" ||
        std::find(o.configs.begin(), o.configs.end(), c.name) != o.configs.end())
      configs.push_back(c);
  }
  // One Side per (weights, KV) pair any configuration uses, opened once.
  std::map<std::pair<WeightFormat, KvCacheDtype>, std::unique_ptr<Side>> sides;
  auto side = [&](WeightFormat w, KvCacheDtype kv) -> StatusOr<Side*> {
    auto& s = sides[{w, kv}];
    if (!s) {
      std::fprintf(stderr, "tandem eval fidelity: loading %s weights over a %s KV cache\n",
                   std::string(engine::WeightFormatName(w)).c_str(),
                   kv == KvCacheDtype::kBf16 ? "bf16" : "fp8_e4m3");
      ASSIGN_OR_RETURN(s, Side::Open(o.model_dir, w, kv, longest, o.threads));
    }
    return s.get();
  };
  ASSIGN_OR_RETURN(Side * ref_side, side(WeightFormat::kBf16, KvCacheDtype::kBf16));
  const int64_t vocab = ref_side->vocab();
  Pipeline reference(ref_side, ref_side);
  std::vector<Run> refs(o.prompts.size());
  for (size_t p = 0; p < o.prompts.size(); ++p)
    RETURN_IF_ERROR(reference.Go(o.prompts[p], {}, o.continuation_tokens, &refs[p]));

  std::vector<FidelityRow> rows;
  for (const FidelityConfig& c : configs) {
    ASSIGN_OR_RETURN(Side * pre, side(c.prefill_weights, c.prefill_kv));
    ASSIGN_OR_RETURN(Side * dec, side(c.decode_weights, c.decode_kv));
    Pipeline pipeline(pre, dec);
    FidelityRow row;
    row.config = c.name;
    std::vector<double> kls;
    int64_t agree = 0, matched = 0;
    double kl_sum[2] = {0, 0};  // prompt, continuation
    int64_t agree_in[2] = {0, 0}, count_in[2] = {0, 0};
    for (size_t p = 0; p < o.prompts.size(); ++p) {
      Run forced, free;
      RETURN_IF_ERROR(pipeline.Go(o.prompts[p], refs[p].greedy, o.continuation_tokens, &forced));
      RETURN_IF_ERROR(pipeline.Go(o.prompts[p], {}, o.continuation_tokens, &free));
      const int64_t positions = static_cast<int64_t>(forced.logits.size()) / vocab;
      for (int64_t t = 0; t < positions; ++t) {
        const float* a = refs[p].logits.data() + t * vocab;
        const float* b = forced.logits.data() + t * vocab;
        const double kl = Kl(a, b, vocab);
        const bool same_top = Argmax(a, vocab) == Argmax(b, vocab);
        const int part = t < static_cast<int64_t>(o.prompts[p].size()) ? 0 : 1;
        kls.push_back(kl);
        agree += same_top ? 1 : 0;
        kl_sum[part] += kl;
        agree_in[part] += same_top ? 1 : 0;
        ++count_in[part];
      }
      size_t same = 0;
      while (same < free.greedy.size() && free.greedy[same] == refs[p].greedy[same]) ++same;
      matched += static_cast<int64_t>(same);
      row.full_matches += same == refs[p].greedy.size() ? 1 : 0;
    }
    row.positions = static_cast<int64_t>(kls.size());
    double sum = 0;
    for (double k : kls) sum += k;
    row.mean_kl = sum / static_cast<double>(std::max<size_t>(1, kls.size()));
    std::sort(kls.begin(), kls.end());
    row.max_kl = kls.empty() ? 0 : kls.back();
    row.p99_kl = kls.empty() ? 0 : kls[std::min(kls.size() - 1, static_cast<size_t>(0.99 * kls.size()))];
    row.top1_agreement =
        static_cast<double>(agree) / static_cast<double>(std::max<int64_t>(1, row.positions));
    row.mean_exact_match = static_cast<double>(matched) / static_cast<double>(o.prompts.size());
    auto share = [](double num, int64_t den) { return den > 0 ? num / static_cast<double>(den) : 0.0; };
    row.prompt_kl = share(kl_sum[0], count_in[0]);
    row.continuation_kl = share(kl_sum[1], count_in[1]);
    row.prompt_top1 = share(static_cast<double>(agree_in[0]), count_in[0]);
    row.continuation_top1 = share(static_cast<double>(agree_in[1]), count_in[1]);
    if (!o.text.empty()) {
      ASSIGN_OR_RETURN(row.perplexity, Perplexity(dec, o.text, static_cast<size_t>(o.perplexity_window)));
    }
    rows.push_back(row);
    std::fprintf(stderr, "tandem eval fidelity: %s done (mean KL %.3g, top-1 %.4f)\n", c.name.c_str(),
                 row.mean_kl, row.top1_agreement);
  }
  return rows;
}

}  // namespace tandem::tools::eval
