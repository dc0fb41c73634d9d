#include "controller/autoscale/prom_text.h"

#include <charconv>
#include <cmath>
#include <limits>
#include <system_error>

namespace tandem::controller::autoscale {
namespace {

bool IsBlank(char c) { return c == ' ' || c == '\t'; }
bool IsAlpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsMetricNameChar(char c, bool first) {
  return IsAlpha(c) || c == '_' || c == ':' || (!first && IsDigit(c));
}
bool IsLabelNameChar(char c, bool first) { return IsAlpha(c) || c == '_' || (!first && IsDigit(c)); }

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    char x = a[i];
    if (x >= 'A' && x <= 'Z') x = static_cast<char>(x - 'A' + 'a');
    if (x != b[i]) return false;
  }
  return true;
}

// A position in one line, with errors that name the line and the (1-based) column.
class Cursor {
 public:
  Cursor(std::string_view line, size_t line_no) : line_(line), line_no_(line_no) {}

  bool AtEnd() const { return pos_ >= line_.size(); }
  // The current character; '\0' at the end (callers never look for '\0').
  char Peek() const { return AtEnd() ? '\0' : line_[pos_]; }
  void Advance() { ++pos_; }
  bool Consume(char c) {
    if (AtEnd() || line_[pos_] != c) return false;
    ++pos_;
    return true;
  }
  // Skips blanks; true when there was at least one.
  bool SkipBlanks() {
    const size_t start = pos_;
    while (!AtEnd() && IsBlank(line_[pos_])) ++pos_;
    return pos_ > start;
  }
  // The longest run of characters accepted by `ok(c, first)`; empty when none.
  template <typename Pred>
  std::string_view Take(Pred ok) {
    const size_t start = pos_;
    while (!AtEnd() && ok(line_[pos_], pos_ == start)) ++pos_;
    return line_.substr(start, pos_ - start);
  }
  std::string_view TakeUntilBlank() {
    return Take([](char c, bool) { return !IsBlank(c); });
  }

  size_t pos() const { return pos_; }
  // An error at the current position, or at `at` (a pos() taken earlier: a token's start).
  Status Error(std::string_view what, std::optional<size_t> at = std::nullopt) const {
    return Status::InvalidArgument("line " + std::to_string(line_no_) + ", column " +
                                   std::to_string(at.value_or(pos_) + 1) + ": " + std::string(what));
  }
  size_t line_no() const { return line_no_; }

 private:
  std::string_view line_;
  size_t line_no_;
  size_t pos_ = 0;
};

// `# HELP name doc`, `# TYPE name type`, or any other comment (ignored).
Status ParseComment(Cursor& c) {
  c.Advance();  // '#'
  c.SkipBlanks();
  const std::string_view keyword = c.TakeUntilBlank();
  if (keyword != "HELP" && keyword != "TYPE") return Status::Ok();
  c.SkipBlanks();
  const std::string_view name = c.Take(IsMetricNameChar);
  if (name.empty()) return c.Error(std::string(keyword) + ": expected a metric name");
  if (!c.AtEnd() && !IsBlank(c.Peek())) return c.Error("invalid character in the metric name");
  if (keyword == "HELP") return Status::Ok();  // the docstring is free text
  c.SkipBlanks();
  const size_t type_at = c.pos();
  const std::string_view type = c.TakeUntilBlank();
  if (type != "counter" && type != "gauge" && type != "histogram" && type != "summary" && type != "untyped") {
    return c.Error("TYPE: expected counter, gauge, histogram, summary or untyped", type_at);
  }
  c.SkipBlanks();
  if (!c.AtEnd()) return c.Error("unexpected text after the TYPE line's type");
  return Status::Ok();
}

// A quoted label value with the escapes \\ \" \n; the cursor is on the opening quote.
Status ParseLabelValue(Cursor& c, std::string* out) {
  c.Advance();  // '"'
  for (;;) {
    if (c.AtEnd()) return c.Error("unterminated label value");
    const char ch = c.Peek();
    c.Advance();
    if (ch == '"') return Status::Ok();
    if (ch != '\\') {
      out->push_back(ch);
      continue;
    }
    if (c.AtEnd()) return c.Error("unterminated label value");
    switch (c.Peek()) {
      case '\\': out->push_back('\\'); break;
      case '"': out->push_back('"'); break;
      case 'n': out->push_back('\n'); break;
      default: return c.Error("invalid escape in a label value (only \\\\, \\\" and \\n)");
    }
    c.Advance();
  }
}

// `{name="value",...}`; the cursor is on '{'.
Status ParseLabels(Cursor& c, const PromParseLimits& limits, PromSample* s) {
  c.Advance();  // '{'
  for (;;) {
    c.SkipBlanks();
    if (c.Consume('}')) return Status::Ok();
    const std::string_view name = c.Take(IsLabelNameChar);
    if (name.empty()) return c.Error("expected a label name or '}'");
    for (const auto& [existing, value] : s->labels) {
      if (existing == name) return c.Error("duplicate label " + std::string(name));
    }
    if (s->labels.size() >= limits.max_labels_per_sample) {
      return Status::ResourceExhausted("line " + std::to_string(c.line_no()) + ": more than " +
                                       std::to_string(limits.max_labels_per_sample) + " labels");
    }
    c.SkipBlanks();
    if (!c.Consume('=')) return c.Error("expected '=' after label " + std::string(name));
    c.SkipBlanks();
    if (c.Peek() != '"') return c.Error("expected '\"' to open the value of " + std::string(name));
    std::string value;
    RETURN_IF_ERROR(ParseLabelValue(c, &value));
    s->labels.emplace_back(std::string(name), std::move(value));
    c.SkipBlanks();
    if (c.Consume(',')) continue;
    if (c.Consume('}')) return Status::Ok();
    return c.Error("expected ',' or '}' after a label value");
  }
}

std::optional<int64_t> ParseTimestamp(std::string_view t) {
  if (!t.empty() && t[0] == '+') t.remove_prefix(1);
  if (t.empty() || t[0] == '+') return std::nullopt;
  int64_t v = 0;
  const auto [ptr, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  if (ec != std::errc() || ptr != t.data() + t.size()) return std::nullopt;
  return v;
}

// `name[{labels}] value [timestamp]`; the cursor is on the first non-blank character.
Status ParseSample(Cursor& c, const PromParseLimits& limits, PromSample* s) {
  const std::string_view name = c.Take(IsMetricNameChar);
  if (name.empty()) return c.Error("expected a metric name");
  s->name = std::string(name);
  const bool blank = c.SkipBlanks();
  if (c.Peek() == '{') {
    RETURN_IF_ERROR(ParseLabels(c, limits, s));
    c.SkipBlanks();
  } else if (!blank && !c.AtEnd()) {
    return c.Error("invalid character in the metric name");
  }
  if (c.AtEnd()) return c.Error("expected a value");
  const size_t value_at = c.pos();
  const std::optional<double> v = ParsePromFloat(c.TakeUntilBlank());
  if (!v) return c.Error("invalid value", value_at);
  s->value = *v;
  c.SkipBlanks();
  if (c.AtEnd()) return Status::Ok();
  const size_t stamp_at = c.pos();
  s->timestamp_ms = ParseTimestamp(c.TakeUntilBlank());
  if (!s->timestamp_ms) return c.Error("invalid timestamp (milliseconds, an integer)", stamp_at);
  c.SkipBlanks();
  if (!c.AtEnd()) return c.Error("unexpected text after the timestamp");
  return Status::Ok();
}

}  // namespace

const std::string* PromSample::Label(std::string_view label) const {
  for (const auto& [name, value] : labels) {
    if (name == label) return &value;
  }
  return nullptr;
}

std::optional<double> ParsePromFloat(std::string_view t) {
  bool negative = false;
  if (!t.empty() && (t[0] == '+' || t[0] == '-')) {
    negative = t[0] == '-';
    t.remove_prefix(1);
  }
  if (t.empty()) return std::nullopt;
  if (EqualsIgnoreCase(t, "nan")) return std::numeric_limits<double>::quiet_NaN();
  if (EqualsIgnoreCase(t, "inf") || EqualsIgnoreCase(t, "infinity")) {
    return negative ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
  }
  // from_chars would also take "nan(...)" and "inf" spellings: only digits or '.' may start here.
  if (!IsDigit(t[0]) && t[0] != '.') return std::nullopt;
  double v = 0;
  const auto [ptr, ec] = std::from_chars(t.data(), t.data() + t.size(), v, std::chars_format::general);
  if (ptr != t.data() + t.size()) return std::nullopt;
  if (ec == std::errc::result_out_of_range) {
    // Go's ParseFloat, which Prometheus uses, turns an underflow into 0 and refuses an overflow.
    const size_t e = t.find_first_of("eE");
    if (e == std::string_view::npos || e + 1 >= t.size() || t[e + 1] != '-') return std::nullopt;
    v = 0;
  } else if (ec != std::errc()) {
    return std::nullopt;
  }
  return negative ? -v : v;
}

StatusOr<std::vector<PromSample>> ParsePromText(std::string_view body, const PromParseLimits& limits,
                                                const PromNameFilter& keep) {
  if (body.size() > limits.max_body_bytes) {
    return Status::ResourceExhausted("the body is " + std::to_string(body.size()) + " bytes, more than the " +
                                     std::to_string(limits.max_body_bytes) + " accepted");
  }
  std::vector<PromSample> out;
  size_t samples = 0;
  size_t line_no = 0;
  size_t pos = 0;
  while (pos < body.size()) {
    size_t end = body.find('\n', pos);
    if (end == std::string_view::npos) end = body.size();
    std::string_view line = body.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    Cursor c(line, line_no);
    c.SkipBlanks();
    if (c.AtEnd()) continue;
    if (c.Peek() == '#') {
      RETURN_IF_ERROR(ParseComment(c));
      continue;
    }
    if (++samples > limits.max_samples) {
      return Status::ResourceExhausted("line " + std::to_string(line_no) + ": more than " +
                                       std::to_string(limits.max_samples) + " samples");
    }
    PromSample s;
    RETURN_IF_ERROR(ParseSample(c, limits, &s));
    if (!keep || keep(s.name)) out.push_back(std::move(s));
  }
  return out;
}

}  // namespace tandem::controller::autoscale
