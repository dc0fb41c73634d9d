#include "controller/autoscale/prom_api.h"

#include <array>
#include <cctype>
#include <cmath>
#include <exception>
#include <limits>

#include <nlohmann/json.hpp>

#include "common/json_depth.h"
#include "controller/autoscale/pool_signals.h"
#include "controller/autoscale/prom_text.h"

namespace tandem::controller::autoscale {
namespace {

using json = nlohmann::json;

constexpr std::array<std::string_view, 3> kPlaceholders = {"{namespace}", "{deployment}", "{pool}"};

// An answer's sample is [<unix time>, "<value>"]; nesting beyond this is not an answer.
constexpr int kMaxAnswerDepth = 16;

const std::string& Value(const PoolLabelValues& values, std::string_view placeholder) {
  if (placeholder == "{namespace}") return values.ns;
  if (placeholder == "{deployment}") return values.deployment;
  return values.pool;
}

// The placeholder `text` starts with, or empty.
std::string_view PlaceholderAt(std::string_view text) {
  for (std::string_view p : kPlaceholders) {
    if (text.substr(0, p.size()) == p) return p;
  }
  return {};
}

std::string Truncated(std::string_view text, size_t max_bytes = 200) {
  return text.size() <= max_bytes ? std::string(text) : std::string(text.substr(0, max_bytes)) + "...";
}

std::string StringOr(const json& object, const char* key, std::string fallback) {
  auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : std::move(fallback);
}

StatusOr<std::optional<double>> ReadAnswer(int http_status, const json& answer) {
  if (!answer.is_object()) return Status::InvalidArgument("the answer is not a JSON object");
  const std::string status = StringOr(answer, "status", "");
  if (http_status < 200 || http_status > 299 || status != "success") {
    std::string message = "HTTP " + std::to_string(http_status);
    if (!status.empty()) message += ", status " + Truncated(status, 32);
    const std::string type = StringOr(answer, "errorType", "");
    const std::string error = StringOr(answer, "error", "");
    if (!type.empty()) message += ", " + Truncated(type, 32);
    if (!error.empty()) message += ": " + Truncated(error);
    return Status::Unavailable(message);
  }
  auto data = answer.find("data");
  if (data == answer.end() || !data->is_object()) return Status::InvalidArgument("no data object");
  const std::string type = StringOr(*data, "resultType", "");
  if (type != "vector")
    return Status::InvalidArgument("resultType \"" + Truncated(type, 32) + "\", want vector");
  auto result = data->find("result");
  if (result == data->end() || !result->is_array()) return Status::InvalidArgument("no result array");
  if (result->empty()) return std::optional<double>();
  if (result->size() > 1) {
    return Status::InvalidArgument(std::to_string(result->size()) + " samples, want at most one");
  }
  const json& sample = result->front();
  auto value = sample.is_object() ? sample.find("value") : sample.end();
  if (value == sample.end() || !value->is_array() || value->size() != 2 || !(*value)[1].is_string()) {
    return Status::InvalidArgument("the sample has no [time, \"value\"]");
  }
  const std::optional<double> v = ParsePromFloat((*value)[1].get_ref<const std::string&>());
  if (!v) return Status::InvalidArgument("the sample's value is not a number");
  if (!std::isfinite(*v) || *v < 0) return std::optional<double>();
  return v;
}

std::string_view MetricOf(PoolSignal signal) {
  switch (signal) {
    case PoolSignal::kKvCacheUsage: return kKvCacheUsageMetric;
    case PoolSignal::kWaitingRequests: return kRequestsWaitingMetric;
    case PoolSignal::kWaitingPrefillTokens: return kPrefillTokensWaitingMetric;
    case PoolSignal::kItlP95: return kInterTokenLatencyMetric;
    case PoolSignal::kTtftP95: return kTimeToFirstTokenMetric;
  }
  return {};
}

bool HostChar(unsigned char c) {
  return std::isalnum(c) || c == '.' || c == '-' || c == ':' || c == '[' || c == ']';
}
bool PathChar(unsigned char c) {
  return std::isalnum(c) || c == '/' || c == '-' || c == '.' || c == '_' || c == '~';
}

}  // namespace

Status CheckSelectorTemplate(std::string_view t) {
  if (t.empty()) return Status::InvalidArgument("the selector template is empty");
  if (t.size() > kMaxSelectorTemplateBytes) {
    return Status::InvalidArgument("the selector template is over " +
                                   std::to_string(kMaxSelectorTemplateBytes) + " bytes");
  }
  for (size_t i = 0; i < t.size(); ++i) {
    if (t[i] == '{') {
      const std::string_view p = PlaceholderAt(t.substr(i));
      if (p.empty()) {
        return Status::InvalidArgument("selector template, byte " + std::to_string(i) +
                                       ": '{' opens none of {namespace}, {deployment}, {pool}");
      }
      i += p.size() - 1;
    } else if (t[i] == '}') {
      return Status::InvalidArgument("selector template, byte " + std::to_string(i) +
                                     ": '}' outside a placeholder");
    }
  }
  return Status::Ok();
}

std::string EscapePromQLString(std::string_view value) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(value.size());
  for (unsigned char c : value) {
    switch (c) {
      case '\\': out += "\\\\"; break;
      case '"': out += "\\\""; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20 || c == 0x7f) {
          out += "\\x";
          out += kHex[c >> 4];
          out += kHex[c & 0xf];
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out;
}

std::string ExpandSelector(std::string_view t, const PoolLabelValues& values) {
  std::string out;
  for (size_t i = 0; i < t.size(); ++i) {
    const std::string_view p = t[i] == '{' ? PlaceholderAt(t.substr(i)) : std::string_view();
    if (p.empty()) {
      out += t[i];
      continue;
    }
    out += EscapePromQLString(Value(values, p));
    i += p.size() - 1;
  }
  return out;
}

StatusOr<int64_t> ParsePromDurationMs(std::string_view text) {
  struct Unit {
    std::string_view name;
    int64_t ms;
  };
  // Largest first; "ms" before "m" so that the longer name is tried first at equal rank.
  static constexpr Unit kUnits[] = {{"y", 365LL * 24 * 3600 * 1000},
                                    {"w", 7LL * 24 * 3600 * 1000},
                                    {"d", 24LL * 3600 * 1000},
                                    {"h", 3600LL * 1000},
                                    {"ms", 1},
                                    {"m", 60LL * 1000},
                                    {"s", 1000}};
  static constexpr int kRank[] = {0, 1, 2, 3, 6, 4, 5};  // ms is the smallest unit
  constexpr int64_t kMaxMs = 10 * 365LL * 24 * 3600 * 1000;
  const Status bad = Status::InvalidArgument("duration '" + Truncated(text, 32) +
                                             "': want e.g. 30s, 2m, 1h30m (units ms s m h d w y)");
  if (text.empty() || text.size() > 32) return bad;
  int64_t total = 0;
  int last_rank = -1;
  size_t i = 0;
  while (i < text.size()) {
    int64_t n = 0;
    const size_t digits_start = i;
    while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
      n = n * 10 + (text[i] - '0');
      if (n > kMaxMs) return bad;
      ++i;
    }
    if (i == digits_start) return bad;
    int unit = -1;
    for (int u = 0; u < static_cast<int>(std::size(kUnits)); ++u) {
      if (text.substr(i, kUnits[u].name.size()) == kUnits[u].name) {
        unit = u;
        break;
      }
    }
    if (unit < 0 || kRank[unit] <= last_rank) return bad;
    last_rank = kRank[unit];
    i += kUnits[unit].name.size();
    if (n > (kMaxMs - total) / kUnits[unit].ms) return bad;
    total += n * kUnits[unit].ms;
  }
  if (total <= 0) return bad;
  return total;
}

std::string_view PoolSignalName(PoolSignal signal) {
  switch (signal) {
    case PoolSignal::kKvCacheUsage: return "kv_cache_usage";
    case PoolSignal::kWaitingRequests: return "waiting_requests";
    case PoolSignal::kItlP95: return "itl_p95";
    case PoolSignal::kTtftP95: return "ttft_p95";
    case PoolSignal::kWaitingPrefillTokens: return "waiting_prefill_tokens";
  }
  return "unknown";
}

std::vector<PoolSignal> SignalsForRole(std::string_view role) {
  if (role == "decode") return {PoolSignal::kKvCacheUsage, PoolSignal::kWaitingRequests, PoolSignal::kItlP95};
  if (role == "prefill") return {PoolSignal::kTtftP95, PoolSignal::kWaitingPrefillTokens};
  return {};
}

bool IsLatencySignal(PoolSignal signal) {
  return signal == PoolSignal::kItlP95 || signal == PoolSignal::kTtftP95;
}

std::string SignalQuery(PoolSignal signal, std::string_view selector, std::string_view rate_window) {
  const std::string metric(MetricOf(signal));
  const std::string sel = "{" + std::string(selector) + "}";
  switch (signal) {
    case PoolSignal::kKvCacheUsage: return "avg((" + metric + sel + " >= 0) < +Inf)";
    case PoolSignal::kWaitingRequests:
    case PoolSignal::kWaitingPrefillTokens: return "sum((" + metric + sel + " >= 0) < +Inf)";
    case PoolSignal::kItlP95:
    case PoolSignal::kTtftP95:
      return "histogram_quantile(0.95, sum by (le) (rate(" + metric + "_bucket" + sel + "[" +
             std::string(rate_window) + "])))";
  }
  return {};
}

std::string UrlQueryEscape(std::string_view value) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(value.size() * 3);
  for (unsigned char c : value) {
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 0xf];
    }
  }
  return out;
}

StatusOr<PromServerUrl> ParsePromServerUrl(std::string_view url) {
  const auto bad = [&](std::string_view why) {
    return Status::InvalidArgument("Prometheus URL '" + Truncated(url, 64) + "': " + std::string(why));
  };
  size_t scheme_end = 0;
  if (url.substr(0, 7) == "http://") {
    scheme_end = 7;
  } else if (url.substr(0, 8) == "https://") {
    scheme_end = 8;
  } else {
    return bad("must start with http:// or https://");
  }
  const size_t slash = url.find('/', scheme_end);
  const std::string_view authority = url.substr(scheme_end, slash - scheme_end);
  std::string_view path = slash == std::string_view::npos ? std::string_view() : url.substr(slash);
  if (authority.empty() || authority.size() > 256) return bad("no host");
  for (unsigned char c : authority) {
    if (!HostChar(c)) return bad("want host[:port] (no credentials)");
  }
  const size_t close = authority.rfind(']');
  const size_t colon = authority.rfind(':');
  if (colon != std::string_view::npos && (close == std::string_view::npos || colon > close)) {
    const std::string_view port = authority.substr(colon + 1);
    if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string_view::npos ||
        std::stoi(std::string(port)) == 0 || std::stoi(std::string(port)) > 65535) {
      return bad("bad port");
    }
  }
  while (!path.empty() && path.back() == '/') path.remove_suffix(1);
  for (unsigned char c : path) {
    if (!PathChar(c)) return bad("the path may hold only letters, digits and / - . _ ~");
  }
  return PromServerUrl{std::string(url.substr(0, scheme_end)) + std::string(authority), std::string(path)};
}

StatusOr<std::optional<double>> ParseInstantAnswer(int http_status, std::string_view body,
                                                   size_t max_body_bytes) {
  if (body.size() > max_body_bytes) {
    return Status::ResourceExhausted("the answer is " + std::to_string(body.size()) + " bytes, over " +
                                     std::to_string(max_body_bytes));
  }
  if (!JsonDepthWithin(body, kMaxAnswerDepth)) return Status::InvalidArgument("the answer nests too deep");
  try {
    const json answer = json::parse(body, nullptr, /*allow_exceptions=*/false);
    if (answer.is_discarded()) {
      if (http_status < 200 || http_status > 299)
        return Status::Unavailable("HTTP " + std::to_string(http_status));
      return Status::InvalidArgument("the answer is not JSON");
    }
    return ReadAnswer(http_status, answer);
  } catch (const std::exception& e) {
    return Status::InvalidArgument(std::string("reading the answer: ") + e.what());
  }
}

}  // namespace tandem::controller::autoscale
