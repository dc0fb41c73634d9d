// ParsePromText: what prometheus-cpp's serializer writes (generated here by the real library),
// the escapes, special values and timestamps, malformed lines (errors naming the line) and caps.
#include "controller/autoscale/prom_text.h"

#include <cmath>
#include <limits>

#include <gtest/gtest.h>
#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

namespace tandem::controller::autoscale {
namespace {

using Labels = std::vector<std::pair<std::string, std::string>>;

std::vector<PromSample> ParseOk(std::string_view body, const PromParseLimits& limits = {}) {
  StatusOr<std::vector<PromSample>> r = ParsePromText(body, limits);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? std::move(r).value() : std::vector<PromSample>();
}

// The first sample named `name` (with bucket bound `le`, compared as a number, when given).
const PromSample* Find(const std::vector<PromSample>& samples, std::string_view name,
                       std::optional<double> le = std::nullopt) {
  for (const PromSample& s : samples) {
    if (s.name != name) continue;
    const std::string* l = s.Label("le");
    if (!le || (l != nullptr && ParsePromFloat(*l) == le)) return &s;
  }
  return nullptr;
}

TEST(PromText, ParsesPrometheusCppSerializerOutput) {
  auto registry = std::make_shared<prometheus::Registry>();
  const std::map<std::string, std::string> constant = {
      {"deployment", "d"}, {"pool", "p"}, {"role", "decode"}};
  auto& usage = prometheus::BuildGauge()
                    .Name("tandem_kv_cache_usage_ratio")
                    .Help("KV \"usage\"\\ratio")
                    .Register(*registry);
  usage.Add(constant).Set(0.25);
  auto& finished =
      prometheus::BuildCounter().Name("tandem_requests_finished_total").Help("h").Register(*registry);
  finished.Add({{"reason", "stop"}, {"pool", "p"}}).Increment(7);
  auto& itl =
      prometheus::BuildHistogram().Name("tandem_inter_token_latency_seconds").Help("h").Register(*registry);
  prometheus::Histogram& h = itl.Add(constant, prometheus::Histogram::BucketBoundaries{0.01, 0.1, 1});
  h.Observe(0.005);
  h.Observe(0.05);
  h.Observe(0.05);
  h.Observe(5);
  auto& weird = prometheus::BuildGauge().Name("weird").Help("h").Register(*registry);
  weird.Add({{"path", "C:\\dir \"q\"\nnext"}}).Set(std::numeric_limits<double>::quiet_NaN());
  weird.Add({{"path", "inf"}}).Set(std::numeric_limits<double>::infinity());
  weird.Add({{"path", "-inf"}}).Set(-std::numeric_limits<double>::infinity());
  weird.Add({{"path", "tiny"}}).Set(1.5e-300);
  const std::string text = prometheus::TextSerializer().Serialize(registry->Collect());

  const std::vector<PromSample> samples = ParseOk(text);
  ASSERT_EQ(samples.size(), 1u + 1u + (2u + 4u) + 4u) << text;
  const PromSample* u = Find(samples, "tandem_kv_cache_usage_ratio");
  ASSERT_NE(u, nullptr);
  EXPECT_EQ(u->value, 0.25);
  EXPECT_EQ(u->labels, (Labels{{"deployment", "d"}, {"pool", "p"}, {"role", "decode"}}));
  EXPECT_FALSE(u->timestamp_ms.has_value());
  const PromSample* f = Find(samples, "tandem_requests_finished_total");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->value, 7);
  EXPECT_EQ(*f->Label("reason"), "stop");
  EXPECT_EQ(f->Label("nope"), nullptr);

  const std::string bucket = "tandem_inter_token_latency_seconds_bucket";
  ASSERT_NE(Find(samples, bucket, 0.01), nullptr) << text;
  EXPECT_EQ(Find(samples, bucket, 0.01)->value, 1);
  EXPECT_EQ(Find(samples, bucket, 0.1)->value, 3);
  EXPECT_EQ(Find(samples, bucket, 1)->value, 3);
  EXPECT_EQ(Find(samples, bucket, std::numeric_limits<double>::infinity())->value, 4);
  EXPECT_EQ(Find(samples, "tandem_inter_token_latency_seconds_count")->value, 4);
  EXPECT_DOUBLE_EQ(Find(samples, "tandem_inter_token_latency_seconds_sum")->value, 5.105);

  int weird_seen = 0;
  for (const PromSample& s : samples) {
    if (s.name != "weird") continue;
    ++weird_seen;
    const std::string& path = *s.Label("path");
    if (path == "C:\\dir \"q\"\nnext") {
      EXPECT_TRUE(std::isnan(s.value));
    } else if (path == "inf") {
      EXPECT_EQ(s.value, std::numeric_limits<double>::infinity());
    } else if (path == "-inf") {
      EXPECT_EQ(s.value, -std::numeric_limits<double>::infinity());
    } else {
      EXPECT_EQ(path, "tiny");
      EXPECT_EQ(s.value, 1.5e-300);
    }
  }
  EXPECT_EQ(weird_seen, 4);
}

TEST(PromText, AnUnescapedNewlineInHelpIsAnErrorOnTheNextLine) {
  // prometheus-cpp 1.0.1 writes HELP text as given: a newline in it breaks the exposition (Prometheus
  // refuses it too). Our agents' help strings have none; the error names the broken line.
  auto registry = std::make_shared<prometheus::Registry>();
  prometheus::BuildGauge().Name("g").Help("two\nlines").Register(*registry).Add({}).Set(1);
  StatusOr<std::vector<PromSample>> r =
      ParsePromText(prometheus::TextSerializer().Serialize(registry->Collect()));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "line 2, column 6: expected a value");
}

TEST(PromText, ValuesTimestampsAndLenientSpacing) {
  const std::vector<PromSample> s = ParseOk(
      "# a free comment\n"
      "\n"
      "   \t\n"
      "a 1\r\n"
      "b{} -2.5e3 1700000000000\n"
      "c { x = \"1\" , y=\"\" , } +Inf -5\n"
      "d NaN\n"
      "e -inf\n"
      "f 1E-2\n"
      "g .5\n"
      "h{x=\"é\\\\n\"} Infinity\n"
      "i 1e-400\n"
      "  j\t3  \t");
  ASSERT_EQ(s.size(), 10u);
  EXPECT_EQ(s[0].name, "a");
  EXPECT_EQ(s[0].value, 1);
  EXPECT_EQ(s[1].value, -2500);
  EXPECT_EQ(s[1].timestamp_ms, 1700000000000);
  EXPECT_TRUE(s[1].labels.empty());
  EXPECT_EQ(s[2].labels, (Labels{{"x", "1"}, {"y", ""}}));
  EXPECT_EQ(s[2].value, std::numeric_limits<double>::infinity());
  EXPECT_EQ(s[2].timestamp_ms, -5);
  EXPECT_TRUE(std::isnan(s[3].value));
  EXPECT_EQ(s[4].value, -std::numeric_limits<double>::infinity());
  EXPECT_EQ(s[5].value, 0.01);
  EXPECT_EQ(s[6].value, 0.5);
  EXPECT_EQ(*s[7].Label("x"), "é\\n");  // an escaped backslash, then a plain n
  EXPECT_EQ(s[7].value, std::numeric_limits<double>::infinity());
  EXPECT_EQ(s[8].value, 0);  // underflow reads as 0, as in Prometheus
  EXPECT_EQ(s[9].name, "j");
  EXPECT_EQ(s[9].value, 3);
}

TEST(PromText, NameFilterKeepsOnlyWantedSamplesButChecksAll) {
  const PromNameFilter keep = [](std::string_view name) { return name == "b"; };
  StatusOr<std::vector<PromSample>> r = ParsePromText("a 1\nb 2\nc 3\n", {}, keep);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->size(), 1u);
  EXPECT_EQ((*r)[0].value, 2);
  EXPECT_FALSE(ParsePromText("a 1\nb 2\nc x\n", {}, keep).ok());
}

TEST(PromText, HelpAndTypeLines) {
  EXPECT_TRUE(ParsePromText("# HELP x some \\n doc \"quoted\"\n# TYPE x gauge\nx 1\n").ok());
  EXPECT_TRUE(ParsePromText("# HELP x\n# TYPE x untyped\n# TYPE y summary\n").ok());
  EXPECT_TRUE(ParsePromText("#HELPER is a comment\n# EOF\n").ok());
}

struct BadCase {
  std::string body;
  std::string message;  // expected in the error
};

TEST(PromText, MalformedLinesAreErrorsNamingTheLine) {
  const BadCase cases[] = {
      {"a 1\nb\n", "line 2, column 2: expected a value"},
      {"ok 1\n\n{a=\"b\"} 1\n", "line 3, column 1: expected a metric name"},
      {"9abc 1", "line 1, column 1: expected a metric name"},
      {"a-b 1", "line 1, column 2: invalid character in the metric name"},
      {"a{b=\"c\" 1", "line 1, column 9: expected ',' or '}'"},
      {"a{b=\"c} 1", "line 1, column 10: unterminated label value"},
      {"a{b=\"c\\t\"} 1", "invalid escape"},
      {"a{b=\"c\\", "unterminated label value"},
      {"a{b} 1", "expected '=' after label b"},
      {"a{b=c} 1", "expected '\"' to open the value of b"},
      {"a{1b=\"c\"} 1", "expected a label name or '}'"},
      {"a{,} 1", "expected a label name or '}'"},
      {"a{b=\"1\",b=\"2\"} 1", "duplicate label b"},
      {"a{b=\"1\"", "expected ',' or '}' after a label value"},
      {"a one", "line 1, column 3: invalid value"},
      {"a 0x10", "invalid value"},
      {"a nan(1)", "invalid value"},
      {"a 1e999", "invalid value"},
      {"a ++1", "invalid value"},
      {"a 1 2.5", "invalid timestamp"},
      {"a 1 2 3", "unexpected text after the timestamp"},
      {"x 1\n# TYPE x gauge extra\n", "line 2"},
      {"# TYPE x blob\n", "line 1, column 10: TYPE: expected counter"},
      {"# TYPE\n", "TYPE: expected a metric name"},
      {"# HELP 1x doc\n", "HELP: expected a metric name"},
      {std::string("a\0 1", 4), "invalid character in the metric name"},
  };
  for (const BadCase& c : cases) {
    StatusOr<std::vector<PromSample>> r = ParsePromText(c.body);
    ASSERT_FALSE(r.ok()) << c.body;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << c.body;
    EXPECT_NE(r.status().message().find(c.message), std::string::npos)
        << c.body << " -> " << r.status().ToString();
  }
}

TEST(PromText, LimitsAreResourceExhausted) {
  PromParseLimits limits;
  limits.max_body_bytes = 8;
  StatusOr<std::vector<PromSample>> r = ParsePromText("a 1\nb 22\n", limits);
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(r.status().message().find("9 bytes, more than the 8"), std::string::npos)
      << r.status().ToString();
  EXPECT_TRUE(ParsePromText("a 1\nb 2\n", limits).ok());

  limits = PromParseLimits();
  limits.max_samples = 2;
  r = ParsePromText("# c\na 1\nb 2\nc 3\n", limits);
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(r.status().message().find("line 4: more than 2 samples"), std::string::npos)
      << r.status().ToString();
  // Filtered-out samples count too: the cap bounds the work, not the result.
  r = ParsePromText("a 1\nb 2\nc 3\n", limits, [](std::string_view) { return false; });
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted);

  limits = PromParseLimits();
  limits.max_labels_per_sample = 2;
  EXPECT_TRUE(ParsePromText("a{x=\"1\",y=\"2\"} 1\n", limits).ok());
  r = ParsePromText("a 1\na{x=\"1\",y=\"2\",z=\"3\"} 1\n", limits);
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(r.status().message().find("line 2: more than 2 labels"), std::string::npos)
      << r.status().ToString();
}

TEST(PromText, DefaultLimitsAcceptALargeRealisticBody) {
  std::string body;
  for (int i = 0; i < 20'000; ++i)
    body += "m{pod=\"p" + std::to_string(i) + "\",le=\"+Inf\"} " + std::to_string(i) + "\n";
  const std::vector<PromSample> s = ParseOk(body);
  ASSERT_EQ(s.size(), 20'000u);
  EXPECT_EQ(s.back().value, 19'999);
  EXPECT_EQ(ParsePromText(std::string((4u << 20) + 1, '\n')).status().code(), StatusCode::kResourceExhausted);
}

TEST(PromText, GarbageNeverCrashes) {
  // Every prefix of a valid body, and bytes of every value in every position: errors or samples,
  // never a crash (ASan/UBSan builds make this a real check).
  const std::string valid = "# TYPE a gauge\na{b=\"x\\\\y\\\"z\\n\",c=\"\"} -1.5e+3 123\n";
  for (size_t n = 0; n <= valid.size(); ++n) (void)ParsePromText(valid.substr(0, n));
  for (size_t pos = 0; pos < valid.size(); ++pos) {
    for (int byte = 0; byte < 256; ++byte) {
      std::string mutated = valid;
      mutated[pos] = static_cast<char>(byte);
      (void)ParsePromText(mutated);
    }
  }
}

TEST(PromFloat, Spellings) {
  EXPECT_EQ(ParsePromFloat("+Inf"), std::numeric_limits<double>::infinity());
  EXPECT_EQ(ParsePromFloat("-Inf"), -std::numeric_limits<double>::infinity());
  EXPECT_EQ(ParsePromFloat("INF"), std::numeric_limits<double>::infinity());
  EXPECT_TRUE(std::isnan(*ParsePromFloat("Nan")));  // prometheus-cpp's spelling
  EXPECT_EQ(ParsePromFloat("0.005"), 0.005);
  EXPECT_EQ(ParsePromFloat("+12"), 12);
  EXPECT_EQ(ParsePromFloat("-0"), 0);
  EXPECT_EQ(ParsePromFloat("2.5E2"), 250);
  for (const char* bad :
       {"", "+", "-", "e5", "1.2.3", "1e", "0x1p3", "1_000", " 1", "1 ", "infx", "nan(0)"}) {
    EXPECT_FALSE(ParsePromFloat(bad).has_value()) << bad;
  }
}

}  // namespace
}  // namespace tandem::controller::autoscale
