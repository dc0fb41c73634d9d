#include "engine/text/bpe_trainer.h"

#include <algorithm>
#include <queue>
#include <set>
#include <unordered_map>

#include "common/base64.h"

namespace tandem::engine::text {
namespace {

uint64_t PairKey(int32_t left, int32_t right) {
  return static_cast<uint64_t>(left) << 32 | static_cast<uint32_t>(right);
}

// One distinct pre-tokenized piece: its current symbols (token ids) and how often it occurs.
struct Word {
  std::vector<int32_t> symbols;
  int64_t count = 0;
};

// A candidate merge in the heap. Stale once `count` differs from the pair's current count.
struct Candidate {
  int64_t count;
  int32_t left;
  int32_t right;
};
// std::priority_queue pops the largest: highest count, then the lowest (left, right).
struct CandidateLess {
  bool operator()(const Candidate& a, const Candidate& b) const {
    if (a.count != b.count) return a.count < b.count;
    if (a.left != b.left) return a.left > b.left;
    return a.right > b.right;
  }
};

// Splits `corpus` into the spans between special tokens (the specials themselves are dropped).
std::vector<std::string_view> CutAroundSpecials(std::string_view corpus,
                                                const std::vector<std::string>& specials) {
  std::vector<std::vector<const std::string*>> by_first(256);
  for (const std::string& s : specials) by_first[static_cast<unsigned char>(s[0])].push_back(&s);
  std::vector<std::string_view> spans;
  size_t start = 0;
  for (size_t pos = 0; pos < corpus.size();) {
    size_t matched = 0;
    for (const std::string* s : by_first[static_cast<unsigned char>(corpus[pos])]) {
      if (corpus.substr(pos, s->size()) == *s) matched = std::max(matched, s->size());
    }
    if (matched == 0) {
      ++pos;
      continue;
    }
    if (pos > start) spans.push_back(corpus.substr(start, pos - start));
    pos += matched;
    start = pos;
  }
  if (start < corpus.size()) spans.push_back(corpus.substr(start));
  return spans;
}

class Trainer {
 public:
  explicit Trainer(std::vector<Word> words) : words_(std::move(words)), stamp_(words_.size(), -1) {
    for (int b = 0; b < 256; ++b) token_ids_.emplace(std::string(1, static_cast<char>(b)), b);
    for (int32_t w = 0; w < static_cast<int32_t>(words_.size()); ++w) {
      const std::vector<int32_t>& s = words_[w].symbols;
      for (size_t i = 0; i + 1 < s.size(); ++i) {
        const uint64_t key = PairKey(s[i], s[i + 1]);
        counts_[key] += words_[w].count;
        std::vector<int32_t>& where = where_[key];
        if (where.empty() || where.back() != w) where.push_back(w);
      }
    }
    for (const auto& [key, count] : counts_) Push(key, count);
  }

  // Merges the best pair into `vocab`; false when no pair is seen min_count times.
  bool MergeBest(int64_t min_count, BpeVocabulary* vocab) {
    while (!heap_.empty()) {
      const Candidate top = heap_.top();
      heap_.pop();
      auto it = counts_.find(PairKey(top.left, top.right));
      if (it == counts_.end() || it->second != top.count) continue;  // stale
      if (top.count < min_count) return false;
      const std::string bytes = vocab->ranks[top.left] + vocab->ranks[top.right];
      auto [id_it, is_new] = token_ids_.emplace(bytes, static_cast<int32_t>(vocab->ranks.size()));
      if (is_new) vocab->ranks.push_back(bytes);
      vocab->merges.emplace_back(top.left, top.right);
      Apply(top.left, top.right, id_it->second);
      return true;
    }
    return false;
  }

 private:
  void Push(uint64_t key, int64_t count) {
    if (count > 0)
      heap_.push({count, static_cast<int32_t>(key >> 32), static_cast<int32_t>(key & 0xffffffffu)});
  }

  // Replaces every (left, right) by `merged` in the words that hold the pair, moving their pair
  // counts by the difference between the old and the new symbols.
  void Apply(int32_t left, int32_t right, int32_t merged) {
    ++merge_index_;
    std::unordered_map<uint64_t, int64_t> delta;
    std::vector<int32_t> where = std::move(where_[PairKey(left, right)]);
    where_.erase(PairKey(left, right));
    std::vector<int32_t> next;
    for (int32_t w : where) {
      if (stamp_[w] == merge_index_) continue;
      stamp_[w] = merge_index_;
      Word& word = words_[w];
      const std::vector<int32_t>& s = word.symbols;
      next.clear();
      for (size_t i = 0; i < s.size(); ++i) {
        if (i + 1 < s.size() && s[i] == left && s[i + 1] == right) {
          next.push_back(merged);
          ++i;
        } else {
          next.push_back(s[i]);
        }
      }
      if (next.size() == s.size()) continue;  // an old entry: the pair is gone from this word
      for (size_t i = 0; i + 1 < s.size(); ++i) delta[PairKey(s[i], s[i + 1])] -= word.count;
      for (size_t i = 0; i + 1 < next.size(); ++i) {
        const uint64_t key = PairKey(next[i], next[i + 1]);
        delta[key] += word.count;
        // Only pairs with the new token are new to this word; the rest already list it.
        if (next[i] == merged || next[i + 1] == merged) {
          std::vector<int32_t>& list = where_[key];
          if (list.empty() || list.back() != w) list.push_back(w);
        }
      }
      word.symbols.swap(next);
    }
    // Apply in key order so the heap sees the same pushes on every run.
    std::vector<std::pair<uint64_t, int64_t>> changes(delta.begin(), delta.end());
    std::sort(changes.begin(), changes.end());
    for (const auto& [key, d] : changes) {
      if (d == 0) continue;
      int64_t& count = counts_[key];
      count += d;
      if (count <= 0) {
        counts_.erase(key);
      } else {
        Push(key, count);
      }
    }
  }

  std::vector<Word> words_;
  std::vector<int64_t> stamp_;  // [word] the last merge that visited it
  int64_t merge_index_ = 0;
  std::unordered_map<uint64_t, int64_t> counts_;              // pair -> occurrences in the corpus
  std::unordered_map<uint64_t, std::vector<int32_t>> where_;  // pair -> words that held it
  std::unordered_map<std::string, int32_t> token_ids_;        // bytes -> rank
  std::priority_queue<Candidate, std::vector<Candidate>, CandidateLess> heap_;
};

Status CheckOptions(const BpeTrainerOptions& options) {
  const int64_t specials = static_cast<int64_t>(options.special_tokens.size());
  if (options.vocab_size < 256 + specials || options.vocab_size > (int64_t{1} << 24)) {
    return Status::InvalidArgument("vocab_size " + std::to_string(options.vocab_size) +
                                   " must be in [256 + " + std::to_string(specials) + " specials, 2^24]");
  }
  std::set<std::string_view> seen;
  for (const std::string& s : options.special_tokens) {
    if (s.empty()) return Status::InvalidArgument("empty special token");
    if (!seen.insert(s).second) return Status::InvalidArgument("special token '" + s + "' listed twice");
  }
  return Status::Ok();
}

}  // namespace

StatusOr<BpeVocabulary> TrainBpe(std::string_view corpus, const BpeTrainerOptions& options) {
  RETURN_IF_ERROR(CheckOptions(options));
  StatusOr<Pretokenizer> pretokenizer = Pretokenizer::FromPattern(options.pattern);
  if (!pretokenizer.ok()) return Status::InvalidArgument(pretokenizer.status().message());

  BpeVocabulary vocab;
  std::unordered_map<std::string_view, int64_t> piece_counts;
  std::vector<std::string_view> pieces;
  for (std::string_view span : CutAroundSpecials(corpus, options.special_tokens)) {
    pieces.clear();
    pretokenizer->Split(span, &pieces);
    for (std::string_view p : pieces) ++piece_counts[p];
    vocab.corpus_pieces += static_cast<int64_t>(pieces.size());
  }
  // Words in byte order, so nothing depends on the hash map's iteration order.
  std::vector<std::pair<std::string_view, int64_t>> sorted(piece_counts.begin(), piece_counts.end());
  std::sort(sorted.begin(), sorted.end());
  vocab.distinct_pieces = static_cast<int64_t>(sorted.size());
  std::vector<Word> words;
  words.reserve(sorted.size());
  for (const auto& [piece, count] : sorted) {
    Word w;
    w.count = count;
    for (unsigned char c : piece) w.symbols.push_back(c);
    words.push_back(std::move(w));
  }

  for (int b = 0; b < 256; ++b) vocab.ranks.emplace_back(1, static_cast<char>(b));
  const auto target_ranks = static_cast<size_t>(options.vocab_size) - options.special_tokens.size();
  Trainer trainer(std::move(words));
  while (vocab.ranks.size() < target_ranks) {
    if (!trainer.MergeBest(options.min_pair_count, &vocab)) {
      return Status::FailedPrecondition(
          "the corpus supports only " + std::to_string(vocab.ranks.size() + options.special_tokens.size()) +
          " tokens (pairs seen at least " + std::to_string(options.min_pair_count) + " times), not " +
          std::to_string(options.vocab_size));
    }
  }
  for (size_t i = 0; i < options.special_tokens.size(); ++i) {
    vocab.special_tokens.push_back(
        {options.special_tokens[i], static_cast<int32_t>(vocab.ranks.size() + i), true});
  }
  return vocab;
}

std::string TiktokenRankFile(const BpeVocabulary& vocabulary) {
  std::string out;
  for (size_t rank = 0; rank < vocabulary.ranks.size(); ++rank) {
    out += Base64Encode(vocabulary.ranks[rank]);
    out += ' ';
    out += std::to_string(rank);
    out += '\n';
  }
  return out;
}

StatusOr<Tokenizer> TokenizerFromVocabulary(const BpeVocabulary& vocabulary, std::string_view pattern) {
  return Tokenizer::FromTiktoken(TiktokenRankFile(vocabulary), pattern, vocabulary.special_tokens);
}

}  // namespace tandem::engine::text
