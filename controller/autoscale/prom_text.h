#pragma once
// A parser of the Prometheus text exposition format, version 0.0.4, as prometheus-cpp's
// TextSerializer (our agents) and the Go client write it:
//
//   # HELP tandem_requests_waiting Requests queued, not yet running.
//   # TYPE tandem_requests_waiting gauge
//   tandem_requests_waiting{deployment="d",pool="p",role="decode"} 2
//   tandem_inter_token_latency_seconds_bucket{pool="p",le="+Inf"} 17 1700000000000
//
// Written for untrusted input (bytes from pods): every malformed line is an InvalidArgument naming
// its line and column, and the body size, the number of samples and the labels per sample are
// capped (ResourceExhausted). It never crashes and never reads past the input.
//
// Accepted beyond the bare grammar, as Prometheus accepts it: blanks around tokens inside braces, a
// trailing comma before '}', "\r\n" line ends, blank lines, comments other than HELP/TYPE, values
// NaN / Inf / +Inf / -Inf / Infinity in any case, exponents. Not checked: the order and uniqueness
// of HELP/TYPE lines, UTF-8 validity of label values, that the samples of a family are adjacent.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"

namespace tandem::controller::autoscale {

// One sample line: `name{labels} value [timestamp]`.
struct PromSample {
  std::string name;
  std::vector<std::pair<std::string, std::string>> labels;  // as written (order kept), unescaped
  double value = 0;
  std::optional<int64_t> timestamp_ms;

  // The value of label `label`, or nullptr when the sample has no such label.
  const std::string* Label(std::string_view label) const;
};

struct PromParseLimits {
  size_t max_body_bytes = 4u << 20;
  size_t max_samples = 100'000;  // sample lines, whether or not a name filter keeps them
  size_t max_labels_per_sample = 64;
};

// When set, only samples whose name it accepts are returned (every line is still checked).
using PromNameFilter = std::function<bool(std::string_view name)>;

// Parses a whole exposition body. Errors: ResourceExhausted over a limit, InvalidArgument on the
// first malformed line ("line 7, column 12: ..."); no partial result.
StatusOr<std::vector<PromSample>> ParsePromText(std::string_view body, const PromParseLimits& limits = {},
                                                const PromNameFilter& keep = nullptr);

// A sample value as the format writes it: a decimal float with optional sign and exponent, or
// NaN / Inf / +Inf / -Inf / Infinity (any case). nullopt when `text` is anything else (the whole
// of it must be the number). Also reads `le` bucket bounds.
std::optional<double> ParsePromFloat(std::string_view text);

}  // namespace tandem::controller::autoscale
