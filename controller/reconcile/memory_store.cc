#include "controller/reconcile/memory_store.h"

namespace tandem::controller::reconcile {
namespace {

std::string Meta(const json& object, const char* field) {
  return FieldReader(object).String(std::string("/metadata/") + field, "");
}

}  // namespace

json MemoryStore::Store(Kind kind, json object) {
  object["metadata"]["resourceVersion"] = std::to_string(next_version_++);
  if (object.contains("spec") && object["spec"].is_object()) {
    object["spec"]["serverDefault"] = "set by the server";  // like a defaulted field
  }
  objects_[{kind, Meta(object, "namespace"), Meta(object, "name")}] = object;
  return object;
}

StatusOr<json> MemoryStore::Get(Kind kind, const std::string& ns, const std::string& name) {
  auto it = objects_.find({kind, ns, name});
  if (it == objects_.end()) return Status::NotFound(name + " not found");
  return it->second;
}

StatusOr<std::vector<json>> MemoryStore::List(Kind kind, const std::string& ns, const json& match_labels) {
  std::vector<json> out;
  for (const auto& [key, object] : objects_) {
    if (std::get<0>(key) != kind || std::get<1>(key) != ns) continue;
    json labels = object["metadata"].value("labels", json::object());
    if (Contains(labels, match_labels)) out.push_back(object);
  }
  return out;
}

StatusOr<json> MemoryStore::Create(Kind kind, const json& object) {
  if (objects_.count({kind, Meta(object, "namespace"), Meta(object, "name")}) > 0) {
    return Status::AlreadyExists(Meta(object, "name") + " exists");
  }
  ++creates;
  json stored = object;
  stored["metadata"]["uid"] = "uid-" + std::to_string(next_version_);
  stored["metadata"]["generation"] = 1;
  return Store(kind, stored);
}

StatusOr<json> MemoryStore::Update(Kind kind, const json& object) {
  auto it = objects_.find({kind, Meta(object, "namespace"), Meta(object, "name")});
  if (it == objects_.end()) return Status::NotFound(Meta(object, "name") + " not found");
  if (fail_next_updates > 0) {
    --fail_next_updates;
    return Status::Aborted("the object has been modified");
  }
  if (Meta(object, "resourceVersion") != Meta(it->second, "resourceVersion")) {
    return Status::Aborted("stale resourceVersion");
  }
  ++updates;
  json stored = object;
  if (stored.contains("spec") && stored["spec"].is_object())
    stored["spec"]["serverDefault"] = "set by the server";
  if (stored.value("spec", json()) != it->second.value("spec", json())) {
    stored["metadata"]["generation"] = it->second["metadata"].value("generation", 1) + 1;
  }
  if (stored["metadata"].contains("deletionTimestamp") &&
      stored["metadata"].value("finalizers", json::array()).empty()) {
    objects_.erase(it);  // the last finalizer is gone
    return stored;
  }
  return Store(kind, stored);
}

StatusOr<json> MemoryStore::UpdateStatus(Kind kind, const json& object) {
  auto it = objects_.find({kind, Meta(object, "namespace"), Meta(object, "name")});
  if (it == objects_.end()) return Status::NotFound(Meta(object, "name") + " not found");
  if (Meta(object, "resourceVersion") != Meta(it->second, "resourceVersion")) {
    return Status::Aborted("stale resourceVersion");
  }
  ++status_updates;
  json stored = it->second;
  stored["status"] = object.value("status", json::object());
  return Store(kind, stored);
}

Status MemoryStore::Delete(Kind kind, const std::string& ns, const std::string& name,
                           const std::string& uid) {
  auto it = objects_.find({kind, ns, name});
  if (it == objects_.end()) return Status::NotFound(name + " not found");
  if (!uid.empty() && Meta(it->second, "uid") != uid) return Status::Aborted("uid precondition failed");
  ++deletes;
  json& stored = it->second;
  if (stored["metadata"].contains("finalizers") && !stored["metadata"]["finalizers"].empty()) {
    stored["metadata"]["deletionTimestamp"] = "2026-12-01T00:00:00Z";  // finalizers hold it
    stored["metadata"]["resourceVersion"] = std::to_string(next_version_++);
    return Status::Ok();
  }
  objects_.erase(it);
  return Status::Ok();
}

json MemoryStore::Seed(Kind kind, json object) {
  if (Meta(object, "uid").empty()) object["metadata"]["uid"] = "seed-" + std::to_string(next_version_);
  return Store(kind, object);
}

json* MemoryStore::Mutable(Kind kind, const std::string& ns, const std::string& name) {
  auto it = objects_.find({kind, ns, name});
  return it == objects_.end() ? nullptr : &it->second;
}

}  // namespace tandem::controller::reconcile
