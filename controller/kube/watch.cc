// Client::Watch: a chunked stream of newline-delimited JSON watch events.
#include <utility>

#include "controller/kube/client.h"
#include "controller/kube/http_client.h"
#include "controller/kube/watch_event.h"

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
  const std::function<bool(std::string_view)> on_line = [&](std::string_view line) {
    StatusOr<WatchEvent> event = DecodeWatchEvent(line, context);
    if (!event.ok()) {
      stream_error = event.status();
      return false;
    }
    return on_event(*event);
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
