#include "controller/kube/watch_event.h"

#include <string>
#include <utility>

#include "controller/kube/json_depth.h"

namespace tandem::controller::kube {
namespace {

// The HTTP code of an ERROR event's Status object; 500 (still an error) without one from 100 to
// 599. Compared as a JSON number, so that 4294967706 does not wrap into a 410 ("history expired").
int HttpCodeOf(const Json& status) {
  if (!status.is_object()) return 500;
  auto code = status.find("code");
  if (code == status.end() || !code->is_number_integer()) return 500;
  if (*code < 100 || *code > 599) return 500;
  return code->get<int>();
}

}  // namespace

StatusOr<WatchEvent> DecodeWatchEvent(std::string_view line, std::string_view context) {
  const auto malformed = [&](std::string_view why) {
    return Status::Internal(std::string(context) + ": malformed watch event" + std::string(why) + ": " +
                            std::string(line.substr(0, 200)));
  };
  if (!JsonDepthWithin(line, kMaxJsonDepth))
    return malformed(" (nested deeper than " + std::to_string(kMaxJsonDepth) + ")");
  Json parsed = Json::parse(line, nullptr, /*allow_exceptions=*/false);
  auto type = parsed.find("type");  // end() unless parsed is an object
  if (!parsed.is_object() || type == parsed.end() || !type->is_string()) return malformed("");
  WatchEvent event;
  event.type = type->get<std::string>();
  auto object = parsed.find("object");
  event.object = object != parsed.end() ? std::move(*object) : Json::object();
  if (event.type != "ERROR") return event;
  return StatusFromHttp(HttpCodeOf(event.object),
                        event.object.dump(-1, ' ', false, Json::error_handler_t::replace), context);
}

}  // namespace tandem::controller::kube
