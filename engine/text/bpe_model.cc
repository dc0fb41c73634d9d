#include "engine/text/bpe_model.h"

#include <algorithm>
#include <queue>

namespace tandem::engine::text {
namespace {

// Pieces up to this many bytes merge by rescanning the pair ranks (tiktoken's loop, fastest for
// short words); longer ones through a priority queue. Both pick the same pair at every step.
constexpr size_t kShortPieceBytes = 48;

std::string Hex(int byte) {
  static const char kDigits[] = "0123456789abcdef";
  return std::string("0x") + kDigits[byte >> 4] + kDigits[byte & 15];
}

}  // namespace

Status BpeModel::Index() {
  bytes_to_id_.reserve(token_bytes_.size());
  for (size_t id = 0; id < token_bytes_.size(); ++id) {
    const std::string& bytes = token_bytes_[id];
    if (bytes.empty()) continue;
    if (!bytes_to_id_.emplace(bytes, static_cast<int32_t>(id)).second) {
      return Status::DataLoss("tokens " + std::to_string(bytes_to_id_[bytes]) + " and " + std::to_string(id) +
                              " have the same bytes");
    }
  }
  for (int b = 0; b < 256; ++b) {
    auto it = bytes_to_id_.find(std::string_view(std::string(1, static_cast<char>(b))));
    if (it == bytes_to_id_.end()) return Status::DataLoss("the vocabulary has no token for byte " + Hex(b));
    byte_id_[b] = it->second;
  }
  return Status::Ok();
}

StatusOr<BpeModel> BpeModel::FromMerges(std::vector<std::string> token_bytes,
                                        const std::vector<std::pair<int32_t, int32_t>>& merges,
                                        bool whole_piece_first) {
  BpeModel m;
  m.token_bytes_ = std::move(token_bytes);
  m.whole_piece_first_ = whole_piece_first;
  RETURN_IF_ERROR(m.Index());
  const auto n = static_cast<int32_t>(m.token_bytes_.size());
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const auto [a, b] = merges[rank];
    if (a < 0 || b < 0 || a >= n || b >= n || m.token_bytes_[a].empty() || m.token_bytes_[b].empty()) {
      return Status::DataLoss("merge " + std::to_string(rank) + " names a token outside the vocabulary");
    }
    auto it = m.bytes_to_id_.find(m.token_bytes_[a] + m.token_bytes_[b]);
    if (it == m.bytes_to_id_.end()) {
      return Status::DataLoss("merge " + std::to_string(rank) + " makes a token the vocabulary lacks");
    }
    // A pair listed twice keeps its last rank, as Hugging Face's loader does.
    m.merges_[static_cast<uint64_t>(a) << 32 | static_cast<uint32_t>(b)] = {static_cast<int32_t>(rank),
                                                                            it->second};
  }
  return m;
}

StatusOr<BpeModel> BpeModel::FromRanks(std::vector<std::string> token_bytes) {
  BpeModel m;
  m.token_bytes_ = std::move(token_bytes);
  m.use_ranks_ = true;
  m.whole_piece_first_ = true;
  RETURN_IF_ERROR(m.Index());
  return m;
}

BpeModel::Merge BpeModel::PairMerge(int32_t left, int32_t right, std::string_view both_bytes) const {
  if (use_ranks_) {
    auto it = bytes_to_id_.find(both_bytes);
    return it == bytes_to_id_.end() ? Merge{-1, -1} : Merge{it->second, it->second};
  }
  auto it = merges_.find(static_cast<uint64_t>(left) << 32 | static_cast<uint32_t>(right));
  return it == merges_.end() ? Merge{-1, -1} : it->second;
}

void BpeModel::Encode(std::string_view piece, std::vector<int32_t>* out) const {
  if (piece.size() == 1) {
    out->push_back(byte_id_[static_cast<unsigned char>(piece[0])]);
    return;
  }
  if (whole_piece_first_) {
    if (auto it = bytes_to_id_.find(piece); it != bytes_to_id_.end()) {
      out->push_back(it->second);
      return;
    }
  }
  // Symbol i starts at byte i; merged-away symbols have len 0. [n] symbols.
  struct Symbol {
    int32_t id;
    uint32_t len;
    int32_t prev;
    int32_t next;
  };
  thread_local std::vector<Symbol> symbols;
  const auto n = static_cast<int32_t>(piece.size());
  symbols.resize(n);
  for (int32_t i = 0; i < n; ++i) {
    symbols[i] = {byte_id_[static_cast<unsigned char>(piece[i])], 1, i - 1, i + 1 < n ? i + 1 : -1};
  }
  auto merge_at = [&](int32_t left) -> Merge {
    const int32_t right = symbols[left].next;
    if (right < 0) return {-1, -1};
    return PairMerge(symbols[left].id, symbols[right].id,
                     piece.substr(left, symbols[left].len + symbols[right].len));
  };
  auto apply = [&](int32_t left, int32_t new_id) {
    Symbol& l = symbols[left];
    Symbol& r = symbols[l.next];
    l.id = new_id;
    l.len += r.len;
    r.len = 0;
    l.next = r.next;
    if (l.next >= 0) symbols[l.next].prev = left;
  };

  if (piece.size() <= kShortPieceBytes) {
    thread_local std::vector<Merge> pair;  // pair[i]: merge of symbol i with its next
    pair.resize(n);
    for (int32_t i = 0; i < n; ++i) pair[i] = merge_at(i);
    for (;;) {
      int32_t best = -1;
      for (int32_t i = 0; i >= 0; i = symbols[i].next) {
        if (pair[i].rank >= 0 && (best < 0 || pair[i].rank < pair[best].rank)) best = i;
      }
      if (best < 0) break;
      apply(best, pair[best].id);
      pair[best] = merge_at(best);
      if (symbols[best].prev >= 0) pair[symbols[best].prev] = merge_at(symbols[best].prev);
    }
  } else {
    struct Candidate {
      int32_t rank;
      int32_t left;
      int32_t right;
      uint32_t len;  // left len + right len when pushed: stale once either symbol changed
      int32_t id;
      bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : left > o.left; }
    };
    thread_local std::vector<Candidate> storage;
    storage.clear();
    std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> queue(std::greater<>(),
                                                                                 std::move(storage));
    auto push = [&](int32_t left) {
      const Merge m = merge_at(left);
      if (m.rank < 0) return;
      const int32_t right = symbols[left].next;
      queue.push({m.rank, left, right, symbols[left].len + symbols[right].len, m.id});
    };
    for (int32_t i = 0; i + 1 < n; ++i) push(i);
    while (!queue.empty()) {
      const Candidate c = queue.top();
      queue.pop();
      const Symbol& l = symbols[c.left];
      if (l.len == 0 || l.next != c.right || l.len + symbols[c.right].len != c.len) continue;
      apply(c.left, c.id);
      push(c.left);
      if (symbols[c.left].prev >= 0) push(symbols[c.left].prev);
    }
  }
  for (int32_t i = 0; i >= 0; i = symbols[i].next) out->push_back(symbols[i].id);
}

}  // namespace tandem::engine::text
