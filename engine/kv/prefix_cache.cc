#include "engine/kv/prefix_cache.h"

#include <algorithm>
#include <cstring>
#include <queue>
#include <utility>

namespace tandem::engine::kv {

class PrefixCache::Node {
 public:
  Node* parent = nullptr;
  std::vector<int32_t> key;  // [page_tokens] token ids; empty for a tenant root
  PageRef page;
  std::unordered_map<uint64_t, std::unique_ptr<Node>> children;  // by KeyHash(key)
  uint64_t last_access = 0;
  int lock_ref = 0;
  std::string salt;  // roots only
};

namespace {

uint64_t KeyHash(std::span<const int32_t> key) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (int32_t t : key) {
    h = (h ^ static_cast<uint32_t>(t)) * 0x100000001b3ull;
    h ^= h >> 32;
  }
  return h;
}

}  // namespace

std::string MakeTenantSalt(std::initializer_list<std::string_view> fields) {
  std::string salt;
  for (std::string_view f : fields) {
    const uint64_t n = f.size();
    char len[8];
    std::memcpy(len, &n, sizeof(n));
    salt.append(len, sizeof(len));
    salt.append(f);
  }
  return salt;
}

PrefixCache::PrefixCache(PageAllocator* allocator, size_t page_tokens)
    : allocator_(allocator), page_tokens_(page_tokens) {}

PrefixCache::~PrefixCache() {
  // Give the cache's references back so the pool returns to its baseline.
  for (auto& [page, node] : page_owner_) (void)allocator_->Unref(node->page);
}

PrefixCache::Node* PrefixCache::FindChild(Node* parent, std::span<const int32_t> key) const {
  auto it = parent->children.find(KeyHash(key));
  if (it == parent->children.end()) return nullptr;
  Node* child = it->second.get();
  return std::equal(key.begin(), key.end(), child->key.begin(), child->key.end()) ? child : nullptr;
}

PrefixCache::Node* PrefixCache::Root(std::string_view salt, bool create) {
  auto it = roots_.find(std::string(salt));
  if (it != roots_.end()) return it->second.get();
  if (!create) return nullptr;
  auto root = std::make_unique<Node>();
  root->salt = std::string(salt);
  Node* raw = root.get();
  roots_.emplace(root->salt, std::move(root));
  return raw;
}

void PrefixCache::LockPath(Node* node) {
  for (Node* n = node; n != nullptr; n = n->parent) {
    if (n->lock_ref++ == 0 && n->parent != nullptr) --evictable_pages_;
  }
}

void PrefixCache::Unlock(Lock lock) {
  for (Node* n = lock; n != nullptr; n = n->parent) {
    if (--n->lock_ref == 0 && n->parent != nullptr) ++evictable_pages_;
  }
}

PrefixCache::Match PrefixCache::MatchAndLock(std::string_view salt, std::span<const int32_t> tokens) {
  Match match;
  const size_t whole_pages = tokens.size() / page_tokens_;
  ++counters_.queries;
  counters_.query_tokens += whole_pages * page_tokens_;
  Node* node = Root(salt, /*create=*/false);
  if (node == nullptr) return match;
  Node* last = nullptr;
  for (size_t i = 0; i < whole_pages; ++i) {
    Node* child = FindChild(node, tokens.subspan(i * page_tokens_, page_tokens_));
    if (child == nullptr || !allocator_->Ref(child->page).ok()) break;
    child->last_access = ++clock_;
    match.pages.push_back(child->page);
    node = last = child;
  }
  match.tokens = match.pages.size() * page_tokens_;
  if (last != nullptr) {
    LockPath(last);
    match.lock = last;
    ++counters_.hits;
    counters_.hit_tokens += match.tokens;
  }
  return match;
}

StatusOr<PrefixCache::Lock> PrefixCache::Insert(std::string_view salt, std::span<const int32_t> tokens,
                                                std::span<const PageRef> pages) {
  if (tokens.size() < pages.size() * page_tokens_) {
    return Status::InvalidArgument("prefix cache insert: tokens do not fill the pages");
  }
  for (const PageRef& ref : pages) {
    if (!allocator_->IsCurrent(ref)) return Status::InvalidArgument("prefix cache insert: stale page ref");
  }
  if (pages.empty()) return Lock{nullptr};
  Node* node = Root(salt, /*create=*/true);
  for (size_t i = 0; i < pages.size(); ++i) {
    std::span<const int32_t> key = tokens.subspan(i * page_tokens_, page_tokens_);
    Node* child = FindChild(node, key);
    if (child == nullptr) {
      const uint64_t h = KeyHash(key);
      if (node->children.count(h) != 0) break;           // hash collision with another run: stop here
      if (page_owner_.count(pages[i].page) != 0) break;  // already cached under another key
      (void)allocator_->Ref(pages[i]);
      auto fresh = std::make_unique<Node>();
      fresh->parent = node;
      fresh->key.assign(key.begin(), key.end());
      fresh->page = pages[i];
      child = fresh.get();
      node->children.emplace(h, std::move(fresh));
      page_owner_.emplace(pages[i].page, child);
      ++cached_pages_;
      ++evictable_pages_;
      ++counters_.inserted_pages;
    }
    child->last_access = ++clock_;
    node = child;
  }
  if (node->parent == nullptr) {  // nothing inserted or matched under a fresh root
    if (node->children.empty() && node->lock_ref == 0) roots_.erase(node->salt);
    return Lock{nullptr};
  }
  LockPath(node);
  return Lock{node};
}

void PrefixCache::RemoveLeaf(Node* leaf) {
  (void)allocator_->Unref(leaf->page);
  page_owner_.erase(leaf->page.page);
  --cached_pages_;
  --evictable_pages_;
  ++counters_.evicted_pages;
  Node* parent = leaf->parent;
  parent->children.erase(KeyHash(leaf->key));  // destroys leaf
  if (parent->parent == nullptr && parent->children.empty() && parent->lock_ref == 0) {
    roots_.erase(parent->salt);
  }
}

size_t PrefixCache::Evict(size_t max_pages) {
  using Item = std::pair<uint64_t, Node*>;
  std::priority_queue<Item, std::vector<Item>, std::greater<>> leaves;
  std::vector<Node*> stack;
  for (auto& [salt, root] : roots_) stack.push_back(root.get());
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    if (n->parent != nullptr && n->children.empty() && n->lock_ref == 0) leaves.emplace(n->last_access, n);
    for (auto& [h, child] : n->children) stack.push_back(child.get());
  }
  size_t evicted = 0;
  while (evicted < max_pages && !leaves.empty()) {
    Node* leaf = leaves.top().second;
    leaves.pop();
    Node* parent = leaf->parent;
    const bool parent_is_root = parent->parent == nullptr;  // RemoveLeaf may erase an empty root
    RemoveLeaf(leaf);
    ++evicted;
    if (!parent_is_root && parent->children.empty() && parent->lock_ref == 0) {
      leaves.emplace(parent->last_access, parent);
    }
  }
  return evicted;
}

bool PrefixCache::Holds(PageId page) const { return page_owner_.count(page) != 0; }

}  // namespace tandem::engine::kv
