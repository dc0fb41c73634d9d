#include "controller/reconcile/apply.h"

#include <set>
#include <utility>

namespace tandem::controller::reconcile {
namespace {

std::string Describe(Kind kind, const json& object) {
  return std::string(InfoOf(kind).kind) + " " + ObjectKey(object);
}

std::string Name(const json& object) { return FieldReader(object).String("/metadata/name", ""); }

// Merges `ours` (a string map) into `*theirs`, leaving other keys alone.
void MergeMap(json* theirs, const json& ours) {
  if (!ours.is_object()) return;
  if (!theirs->is_object()) *theirs = json::object();
  for (auto it = ours.begin(); it != ours.end(); ++it) (*theirs)[it.key()] = it.value();
}

StatusOr<bool> ApplyOne(ObjectStore& store, std::string_view owner_uid, const DesiredObject& d,
                        ApplyResult* result) {
  StatusOr<Kind> kind = KindOfObject(d.object);
  if (!kind.ok()) return kind.status();
  FieldReader r(d.object);
  std::string ns = r.String("/metadata/namespace", ""), name = r.String("/metadata/name", "");
  json stamped = Stamped(d);
  StatusOr<json> live = store.Get(*kind, ns, name);
  if (!live.ok() && live.status().code() != StatusCode::kNotFound) return live.status();
  if (!live.ok()) {
    // Create with everything, create_only fields included.
    json full = d.object;
    full["metadata"]["annotations"][std::string(kAppliedHashAnnotation)] =
        stamped["metadata"]["annotations"][std::string(kAppliedHashAnnotation)];
    StatusOr<json> created = store.Create(*kind, full);
    if (!created.ok()) return created.status().WithContext("creating " + Describe(*kind, d.object));
    ++result->created;
    result->created_names.push_back(Describe(*kind, d.object));
    return true;
  }
  if (!IsControlledBy(*live, owner_uid)) {
    result->not_owned.push_back(Describe(*kind, d.object));
    return false;
  }
  if (FieldReader(*live).String("/metadata/deletionTimestamp", "") != "") {
    return false;  // being deleted (e.g. a foreground cascade); recreated on a later pass
  }
  if (UpToDate(*live, stamped)) {
    ++result->unchanged;
    return false;
  }
  StatusOr<json> updated = store.Update(*kind, MergedForUpdate(*live, stamped, d.create_only));
  if (!updated.ok()) return updated.status().WithContext("updating " + Describe(*kind, d.object));
  ++result->updated;
  return true;
}

}  // namespace

bool Contains(const json& have, const json& want) {
  if (want.is_object()) {
    if (!have.is_object()) return false;
    for (auto it = want.begin(); it != want.end(); ++it) {
      auto h = have.find(it.key());
      if (h == have.end() || !Contains(*h, it.value())) return false;
    }
    return true;
  }
  if (want.is_array()) {
    if (!have.is_array() || have.size() != want.size()) return false;
    for (size_t i = 0; i < want.size(); ++i) {
      if (!Contains(have[i], want[i])) return false;
    }
    return true;
  }
  if (want.is_number() && have.is_number()) return want.get<double>() == have.get<double>();
  return have == want;
}

json Stamped(const DesiredObject& d) {
  json out = d.object;
  for (const std::string& path : d.create_only) {
    json::json_pointer p(path);
    if (out.contains(p)) out.at(p.parent_pointer()).erase(p.back());
  }
  json& annotations = out["metadata"]["annotations"];
  if (!annotations.is_object()) annotations = json::object();
  annotations.erase(std::string(kAppliedHashAnnotation));
  std::string hash = ContentHash(out.dump());
  annotations[std::string(kAppliedHashAnnotation)] = hash;
  return out;
}

bool UpToDate(const json& live, const json& stamped) {
  json ours = stamped;
  ours.erase("apiVersion");
  ours.erase("kind");
  json& meta = ours["metadata"];
  // Compare only what we set in metadata; the server owns the rest.
  json managed_meta = json::object();
  for (const char* key : {"labels", "annotations", "ownerReferences"}) {
    if (meta.contains(key)) managed_meta[key] = meta[key];
  }
  ours["metadata"] = managed_meta;
  return Contains(live, ours);
}

json MergedForUpdate(const json& live, const json& stamped, const std::vector<std::string>& create_only) {
  json out = live;
  const json& meta = stamped.at("metadata");
  MergeMap(&out["metadata"]["labels"], meta.value("labels", json::object()));
  MergeMap(&out["metadata"]["annotations"], meta.value("annotations", json::object()));
  if (meta.contains("ownerReferences")) {
    json refs = meta["ownerReferences"];
    auto live_meta = live.find("metadata");
    if (live_meta != live.end() && live_meta->is_object() && live_meta->contains("ownerReferences") &&
        live_meta->at("ownerReferences").is_array()) {
      for (const json& ref : live_meta->at("ownerReferences")) {
        bool controller = ref.is_object() && ref.contains("controller") && ref["controller"] == true;
        if (!controller) refs.push_back(ref);  // keep other (non-controller) owners
      }
    }
    out["metadata"]["ownerReferences"] = refs;
  }
  for (auto it = stamped.begin(); it != stamped.end(); ++it) {
    if (it.key() == "metadata" || it.key() == "status") continue;
    out[it.key()] = it.value();
  }
  for (const std::string& path : create_only) {
    json::json_pointer p(path);
    if (live.contains(p)) out[p] = live.at(p);
  }
  return out;
}

StatusOr<ApplyResult> ApplyChildren(ObjectStore& store, std::string_view owner_uid,
                                    const std::vector<DesiredObject>& desired, const PruneScope& prune) {
  ApplyResult result;
  std::set<std::pair<Kind, std::string>> wanted;
  for (const DesiredObject& d : desired) {
    StatusOr<bool> wrote = ApplyOne(store, owner_uid, d, &result);
    if (!wrote.ok()) return wrote.status();
    wanted.insert({*KindOfObject(d.object), Name(d.object)});
  }
  for (Kind kind : prune.kinds) {
    StatusOr<std::vector<json>> items = store.List(kind, prune.ns, prune.match_labels);
    if (!items.ok()) return items.status();
    for (const json& item : *items) {
      if (!IsControlledBy(item, owner_uid) || wanted.count({kind, Name(item)}) > 0) continue;
      if (FieldReader(item).String("/metadata/deletionTimestamp", "") != "") continue;
      Status s = store.Delete(kind, prune.ns, Name(item), FieldReader(item).String("/metadata/uid", ""));
      if (!s.ok() && s.code() != StatusCode::kNotFound) {
        return s.WithContext("pruning " + Describe(kind, item));
      }
      if (s.ok()) ++result.deleted;
    }
  }
  return result;
}

}  // namespace tandem::controller::reconcile
