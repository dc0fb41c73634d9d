// Client::Watch: a chunked stream of newline-delimited JSON watch events.
#include <utility>

#include "controller/kube/client.h"
#include "controller/kube/http_client.h"

namespace tandem::controller::kube {

Status Client::Watch(const ResourceRef& ref, std::string_view ns, const WatchOptions& options,
                     const WatchCallback& on_event, CancelToken* cancel) {
  HttpRequest request;
  request.method = "GET";
  request.target =
      ResourcePath(ref, ns) +
      QueryString({
          {"watch", "true"},
          {"resourceVersion", options.resource_version},
          {"allowWatchBookmarks", options.allow_bookmarks ? "true" : ""},
          {"timeoutSeconds", options.timeout_seconds > 0 ? std::to_string(options.timeout_seconds) : ""},
          {"labelSelector", options.label_selector},
          {"fieldSelector", options.field_selector},
      });
  // The server ends the watch at timeoutSeconds; our deadline only catches a server that does not.
  request.timeout_ms =
      options.timeout_seconds > 0 ? options.timeout_seconds * 1000 + options_.request_timeout_ms : 0;
  request.cancel = cancel;
  const std::string context = "WATCH " + request.target;

  Status stream_error;  // a malformed or ERROR event ends the stream with this
  WatchEvent event;
  const std::function<bool(std::string_view)> on_line = [&](std::string_view line) {
    Json parsed = Json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!parsed.is_object() || !parsed.contains("type") || !parsed["type"].is_string()) {
      stream_error =
          Status::Internal(context + ": malformed watch event: " + std::string(line.substr(0, 200)));
      return false;
    }
    event.type = parsed["type"].get<std::string>();
    event.object = parsed.contains("object") ? std::move(parsed["object"]) : Json::object();
    if (event.type == "ERROR") {
      int code = 500;  // an ERROR without a numeric code is still an error
      if (event.object.is_object() && event.object.contains("code") &&
          event.object["code"].is_number_integer()) {
        code = event.object["code"].get<int>();
      }
      stream_error =
          StatusFromHttp(code, event.object.dump(-1, ' ', false, Json::error_handler_t::replace), context);
      return false;
    }
    return on_event(event);
  };
  StatusOr<HttpResponse> response = Send("watch", request, &on_line);
  if (!response.ok()) {
    // The stream broke; a cancel shows up as Cancelled, a drop as Unavailable.
    return response.status();
  }
  if (response.value().status < 200 || response.value().status > 299) {
    return StatusFromHttp(response.value().status, response.value().body, context);
  }
  return stream_error;
}

}  // namespace tandem::controller::kube
