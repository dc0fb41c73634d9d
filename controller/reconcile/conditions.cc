#include "controller/reconcile/conditions.h"

#include <ctime>

namespace tandem::controller::reconcile {

std::string StringField(const json& object, const char* field) {
  if (!object.is_object()) return "";
  auto it = object.find(field);
  return it != object.end() && it->is_string() ? it->get<std::string>() : "";
}

json StoredConditions(const json& object) {
  if (!object.is_object()) return nullptr;
  auto status = object.find("status");
  if (status == object.end() || !status->is_object()) return nullptr;
  auto list = status->find("conditions");
  return list != status->end() && list->is_array() ? *list : json();
}

const json* FindCondition(const json& status, std::string_view type) {
  if (!status.is_object()) return nullptr;
  auto list = status.find("conditions");
  if (list == status.end() || !list->is_array()) return nullptr;
  for (const json& c : *list) {
    if (!c.is_object()) continue;
    auto t = c.find("type");
    if (t != c.end() && t->is_string() && t->get_ref<const std::string&>() == type) return &c;
  }
  return nullptr;
}

bool ConditionIsTrue(const json& status, std::string_view type) {
  const json* c = FindCondition(status, type);
  if (c == nullptr) return false;
  auto s = c->find("status");
  return s != c->end() && s->is_string() && s->get_ref<const std::string&>() == "True";
}

std::vector<Condition> InvalidSpecConditions(const std::string& message) {
  return {{std::string(kReady), false, std::string(kReasonInvalidSpec), message},
          {std::string(kProgressing), false, std::string(kReasonInvalidSpec), message},
          {std::string(kDegraded), true, std::string(kReasonInvalidSpec), message}};
}

json MergeConditions(const json& existing, const std::vector<Condition>& desired, int64_t generation,
                     std::string_view now) {
  json holder = json{{"conditions", existing.is_array() ? existing : json::array()}};
  json out = json::array();
  for (const Condition& c : desired) {
    std::string status = c.status ? "True" : "False";
    std::string since(now);
    if (const json* old = FindCondition(holder, c.type)) {
      auto old_status = old->find("status");
      auto old_time = old->find("lastTransitionTime");
      if (old_status != old->end() && *old_status == status && old_time != old->end() &&
          old_time->is_string()) {
        since = old_time->get<std::string>();
      }
    }
    out.push_back(json{{"type", c.type},
                       {"status", status},
                       {"reason", c.reason},
                       {"message", c.message},
                       {"observedGeneration", generation},
                       {"lastTransitionTime", since}});
  }
  return out;
}

std::string Rfc3339(int64_t unix_seconds) {
  std::time_t t = static_cast<std::time_t>(unix_seconds);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace tandem::controller::reconcile
