// StatusFromHttp (declared in client.h): HTTP status + Kubernetes Status body -> tandem::Status.
#include <string>

#include <nlohmann/json.hpp>

#include "controller/kube/client.h"

namespace tandem::controller::kube {
namespace {

StatusCode CodeFor(int http_status, bool is_create) {
  switch (http_status) {
    case 400:
    case 413:
    case 415:
    case 422: return StatusCode::kInvalidArgument;
    case 401: return StatusCode::kUnauthenticated;
    case 403: return StatusCode::kPermissionDenied;
    case 404: return StatusCode::kNotFound;
    case 405: return StatusCode::kUnimplemented;
    case 408: return StatusCode::kDeadlineExceeded;
    case 409: return is_create ? StatusCode::kAlreadyExists : StatusCode::kAborted;
    case 410: return StatusCode::kOutOfRange;
    case 429: return StatusCode::kUnavailable;
    default: break;
  }
  if (http_status >= 500 && http_status <= 599) return StatusCode::kUnavailable;
  return StatusCode::kUnknown;
}

}  // namespace

Status StatusFromHttp(int http_status, std::string_view body, std::string_view context, bool is_create) {
  std::string reason;
  std::string message;
  const nlohmann::json parsed = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_object() && parsed.contains("kind") && parsed["kind"] == "Status") {
    if (parsed.contains("reason") && parsed["reason"].is_string())
      reason = parsed["reason"].get<std::string>();
    if (parsed.contains("message") && parsed["message"].is_string()) {
      message = parsed["message"].get<std::string>();
    }
  } else {
    constexpr size_t kMaxRaw = 200;
    message = std::string(body.substr(0, kMaxRaw));
    if (body.size() > kMaxRaw) message += "...";
  }
  std::string text(context);
  if (!text.empty()) text += ": ";
  text += std::to_string(http_status);
  if (!reason.empty()) text += " " + reason;
  if (!message.empty()) text += ": " + message;
  return Status(CodeFor(http_status, is_create), std::move(text));
}

}  // namespace tandem::controller::kube
