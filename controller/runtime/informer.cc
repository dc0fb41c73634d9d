#include "controller/runtime/informer.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "common/logging.h"
#include "controller/kube/cancel.h"
#include "controller/kube/client.h"
#include "controller/runtime/clock_wait.h"

namespace tandem::controller::runtime {
namespace {

using Json = nlohmann::json;

std::string StringAt(const Json& obj, const char* a, const char* b) {
  auto it = obj.find(a);
  if (it == obj.end() || !it->is_object()) return "";
  auto jt = it->find(b);
  return jt != it->end() && jt->is_string() ? jt->get<std::string>() : "";
}

std::string ResourceVersionOf(const Json& obj) { return StringAt(obj, "metadata", "resourceVersion"); }

std::vector<std::string> OwnerUids(const Json& obj) {
  std::vector<std::string> uids;
  auto meta = obj.find("metadata");
  if (meta == obj.end() || !meta->is_object()) return uids;
  auto refs = meta->find("ownerReferences");
  if (refs == meta->end() || !refs->is_array()) return uids;
  for (const Json& ref : *refs) {
    if (ref.is_object() && ref.contains("uid") && ref["uid"].is_string()) uids.push_back(ref["uid"]);
  }
  return uids;
}

}  // namespace

std::string ObjectKey(const Json& object) {
  if (!object.is_object()) return "";
  std::string name = StringAt(object, "metadata", "name");
  if (name.empty()) return "";
  std::string ns = StringAt(object, "metadata", "namespace");
  return ns.empty() ? name : ns + "/" + name;
}

void SplitObjectKey(const std::string& key, std::string* ns, std::string* name) {
  size_t slash = key.find('/');
  if (slash == std::string::npos) {
    ns->clear();
    *name = key;
  } else {
    *ns = key.substr(0, slash);
    *name = key.substr(slash + 1);
  }
}

Informer::Informer(kube::Client* client, InformerOptions options)
    : client_(client),
      options_(std::move(options)),
      clock_(options_.clock ? *options_.clock : SteadyClock::Default()),
      cancel_(std::make_unique<kube::CancelToken>()),
      sleeper_(std::make_unique<Sleeper>(clock_)),
      rng_state_(static_cast<uint64_t>(clock_.NowNanos()) ^ reinterpret_cast<uintptr_t>(this)) {}

Informer::~Informer() { Stop(); }

void Informer::AddEventHandlers(EventHandlers handlers) { handlers_.push_back(std::move(handlers)); }

void Informer::Start() {
  started_ = true;
  thread_ = std::thread([this] { Run(); });
}

void Informer::Stop() {
  stopped_ = true;
  cancel_->Cancel();
  sleeper_->Interrupt();
  {
    std::lock_guard<std::mutex> lock(mu_);  // so a WaitForSync between its check and wait wakes
  }
  synced_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Informer::Run() {
  bool need_list = true;
  while (!stopped_) {
    if (need_list) {
      Status s = ListAndReplace();
      if (!s.ok()) {
        RecordError(s);
        if (!sleeper_->SleepFor(NextBackoff())) break;
        continue;
      }
      need_list = false;
      backoff_ = std::chrono::nanoseconds(0);
    }
    bool made_progress = false;
    Status s = WatchOnce(&made_progress);
    if (stopped_) break;
    if (made_progress) backoff_ = std::chrono::nanoseconds(0);
    if (s.code() == StatusCode::kOutOfRange) {
      // Our resourceVersion left the server's history: relist and diff.
      TANDEM_LOG(Info) << "informer " << options_.resource.GroupResource() << ": " << s.ToString()
                       << "; relisting";
      need_list = true;
      if (!made_progress && !sleeper_->SleepFor(NextBackoff())) break;
      continue;
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++stats_.resumes;
    }
    if (!s.ok()) RecordError(s);
    // A watch that ended without delivering anything (an error, or a server closing at once)
    // waits before the next one so a broken server is not hammered.
    if (!made_progress && !sleeper_->SleepFor(NextBackoff())) break;
  }
}

Status Informer::ListAndReplace() {
  kube::ListOptions list;
  list.label_selector = options_.label_selector;
  list.limit = options_.page_size;
  list.cancel = cancel_.get();
  StatusOr<Json> got = client_->ListAll(options_.resource, options_.namespace_name, list);
  if (!got.ok()) return got.status().WithContext("list " + options_.resource.GroupResource());
  if (!got->is_object())
    return Status::Internal("list " + options_.resource.GroupResource() + ": not an object");
  const Json items = got->value("items", Json::array());
  std::map<std::string, ObjectPtr> fresh;
  if (items.is_array()) {
    for (const Json& item : items) {
      std::string key = ObjectKey(item);
      if (key.empty()) continue;  // nameless items cannot be cached; the server never sends them
      Json obj = item;
      // List items lack apiVersion/kind; fill them so cached objects look like watched ones.
      if (!obj.contains("apiVersion")) obj["apiVersion"] = options_.resource.ApiVersion();
      if (!obj.contains("kind")) obj["kind"] = options_.resource.kind;
      fresh[key] = std::make_shared<const Json>(std::move(obj));
    }
  }
  std::vector<Delta> deltas;
  {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<std::string> gone;
    for (const auto& [key, obj] : objects_) {
      if (!fresh.count(key)) gone.push_back(key);
    }
    for (const std::string& key : gone) Erase(key, &deltas);
    for (auto& [key, obj] : fresh) Upsert(obj, &deltas);
    last_rv_ = StringAt(*got, "metadata", "resourceVersion");
    stats_.last_resource_version = last_rv_;
    if (stats_.lists > 0) ++stats_.relists;
    ++stats_.lists;
  }
  Deliver(deltas);
  {
    std::lock_guard<std::mutex> lock(mu_);
    synced_ = true;
  }
  synced_cv_.notify_all();
  return Status::Ok();
}

Status Informer::WatchOnce(bool* made_progress) {
  kube::WatchOptions watch;
  {
    std::lock_guard<std::mutex> lock(mu_);
    watch.resource_version = last_rv_;
  }
  watch.allow_bookmarks = true;
  watch.timeout_seconds = options_.watch_timeout_s;
  watch.label_selector = options_.label_selector;
  return client_->Watch(
      options_.resource, options_.namespace_name, watch,
      [&](const kube::WatchEvent& event) {
        *made_progress = true;
        std::string rv = ResourceVersionOf(event.object);
        std::vector<Delta> deltas;
        {
          std::lock_guard<std::mutex> lock(mu_);
          ++stats_.watch_events;
          if (!rv.empty()) {
            last_rv_ = rv;
            stats_.last_resource_version = rv;
          }
          if (event.type == "ADDED" || event.type == "MODIFIED") {
            if (!ObjectKey(event.object).empty()) Upsert(std::make_shared<const Json>(event.object), &deltas);
          } else if (event.type == "DELETED") {
            Erase(ObjectKey(event.object), &deltas);
          }  // BOOKMARK: only the resourceVersion moves
        }
        Deliver(deltas);
        return !stopped_.load();
      },
      cancel_.get());
}

void Informer::Upsert(ObjectPtr obj, std::vector<Delta>* deltas) {
  std::string key = ObjectKey(*obj);
  auto it = objects_.find(key);
  if (it != objects_.end() && ResourceVersionOf(*it->second) == ResourceVersionOf(*obj)) return;
  ObjectPtr old_obj;
  if (it != objects_.end()) {
    old_obj = it->second;
    for (const std::string& uid : OwnerUids(*old_obj)) {
      auto idx = owner_index_.find(uid);
      if (idx == owner_index_.end()) continue;
      idx->second.erase(key);
      if (idx->second.empty()) owner_index_.erase(idx);
    }
  }
  for (const std::string& uid : OwnerUids(*obj)) owner_index_[uid].insert(key);
  objects_[key] = obj;
  deltas->push_back(old_obj ? Delta{Delta::kUpdate, old_obj, obj} : Delta{Delta::kAdd, nullptr, obj});
}

void Informer::Erase(const std::string& key, std::vector<Delta>* deltas) {
  auto it = objects_.find(key);
  if (it == objects_.end()) return;
  for (const std::string& uid : OwnerUids(*it->second)) {
    auto idx = owner_index_.find(uid);
    if (idx == owner_index_.end()) continue;
    idx->second.erase(key);
    if (idx->second.empty()) owner_index_.erase(idx);
  }
  deltas->push_back(Delta{Delta::kDelete, it->second, nullptr});
  objects_.erase(it);
}

void Informer::Deliver(const std::vector<Delta>& deltas) {
  for (const Delta& d : deltas) {
    for (const EventHandlers& h : handlers_) {
      if (d.kind == Delta::kAdd && h.on_add) h.on_add(d.new_obj);
      if (d.kind == Delta::kUpdate && h.on_update) h.on_update(d.old_obj, d.new_obj);
      if (d.kind == Delta::kDelete && h.on_delete) h.on_delete(d.old_obj);
    }
  }
}

std::chrono::nanoseconds Informer::NextBackoff() {
  backoff_ = backoff_.count() == 0 ? options_.initial_backoff
                                   : std::min(backoff_ * 2, std::chrono::nanoseconds(options_.max_backoff));
  // xorshift64: jitter needs no quality, only to keep informers from retrying in lockstep.
  rng_state_ ^= rng_state_ << 13;
  rng_state_ ^= rng_state_ >> 7;
  rng_state_ ^= rng_state_ << 17;
  double unit = static_cast<double>(rng_state_ >> 11) * (1.0 / 9007199254740992.0);
  return std::chrono::nanoseconds(
      static_cast<int64_t>(static_cast<double>(backoff_.count()) * (1.0 + options_.jitter * unit)));
}

void Informer::RecordError(const Status& status) {
  TANDEM_LOG(Warning) << "informer " << options_.resource.GroupResource() << ": " << status.ToString();
  std::lock_guard<std::mutex> lock(mu_);
  ++stats_.errors;
  stats_.last_error = status;
}

bool Informer::HasSynced() const {
  std::lock_guard<std::mutex> lock(mu_);
  return synced_;
}

bool Informer::WaitForSync(std::chrono::milliseconds timeout) const {
  std::unique_lock<std::mutex> lock(mu_);
  synced_cv_.wait_for(lock, timeout, [&] { return synced_ || stopped_.load(); });
  return synced_;
}

ObjectPtr Informer::Get(const std::string& ns, const std::string& name) const {
  return GetByKey(ns.empty() ? name : ns + "/" + name);
}

ObjectPtr Informer::GetByKey(const std::string& key) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = objects_.find(key);
  return it == objects_.end() ? nullptr : it->second;
}

std::vector<ObjectPtr> Informer::List() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<ObjectPtr> out;
  out.reserve(objects_.size());
  for (const auto& [key, obj] : objects_) out.push_back(obj);
  return out;
}

std::vector<ObjectPtr> Informer::ListNamespace(const std::string& ns) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<ObjectPtr> out;
  std::string prefix = ns + "/";
  for (auto it = objects_.lower_bound(prefix); it != objects_.end() && it->first.rfind(prefix, 0) == 0;
       ++it) {
    out.push_back(it->second);
  }
  return out;
}

std::vector<ObjectPtr> Informer::ListByOwner(const std::string& owner_uid) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<ObjectPtr> out;
  auto idx = owner_index_.find(owner_uid);
  if (idx == owner_index_.end()) return out;
  for (const std::string& key : idx->second) out.push_back(objects_.at(key));
  return out;
}

std::vector<std::string> Informer::ListKeys() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> out;
  for (const auto& [key, obj] : objects_) out.push_back(key);
  return out;
}

InformerStats Informer::Stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

}  // namespace tandem::controller::runtime
