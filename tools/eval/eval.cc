// `tandem eval tools|score`: tool-call validity, trigger precision/recall and argument accuracy of
// a model behind any OpenAI-compatible endpoint, or of a model directory served by `tandem local`
// in each precision configuration side by side (docs/eval.md).
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "common/json_depth.h"
#include "tools/bench/report.h"
#include "tools/commands.h"
#include "tools/eval/configs.h"
#include "tools/eval/tool_runner.h"
#include "tools/eval/tool_suite.h"
#include "tools/local_stack.h"

namespace tandem::tools {
namespace {

namespace fs = std::filesystem;
using bench::Cell;
using bench::Num;
using bench::Report;
using bench::Table;
using bench::Text;
using eval::CaseAnswer;
using eval::CaseScore;
using eval::ToolCase;
using eval::ToolMetrics;
using Json = nlohmann::json;

constexpr char kUsage[] =
    "usage: tandem eval <tools|score> [flags]\n"
    "  tools   run tool-calling suites through the OpenAI chat API and score them\n"
    "          --suite FILE (JSONL; repeat for several)  --out DIR (eval-results)\n"
    "          --url http://HOST:PORT --api-key KEY --model-name NAME   (any OpenAI-compatible server)\n"
    "          | --model DIR [--configs bf16,fp8-kv,int4,fp8,pd-split] [--threads N]   (tandem local, one\n"
    "            stack per precision configuration)\n"
    "          --limit N (first N cases of each suite)  --concurrency N (4)  --max-tokens N (256)\n"
    "  score   score recorded answers (JSONL, as `tools` writes them) without a server\n"
    "          --suite FILE --answers FILE [--verdicts FILE (one scored case per line)]\n";

struct Options {
  std::string sub;
  std::vector<std::string> suites;
  std::string out = "eval-results";
  std::string url, api_key, model_name, model_dir;
  std::vector<std::string> configs;
  std::string answers, verdicts;
  int limit = 0, concurrency = 4, max_tokens = 256, threads = 1;
};

std::string ParseArgs(const std::vector<std::string>& args, Options* o) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& flag = args[i];
    if (i + 1 >= args.size()) return flag + " needs a value";
    const std::string& v = args[++i];
    const auto integer = [&](int lo, int hi, int* dst) {
      char* end = nullptr;
      const long n = std::strtol(v.c_str(), &end, 10);
      if (v.empty() || *end != '\0' || n < lo || n > hi) return false;
      *dst = static_cast<int>(n);
      return true;
    };
    bool ok = true;
    if (flag == "--suite") {
      o->suites.push_back(v);
    } else if (flag == "--out") {
      o->out = v;
    } else if (flag == "--url") {
      o->url = v;
    } else if (flag == "--api-key") {
      o->api_key = v;
    } else if (flag == "--model-name") {
      o->model_name = v;
    } else if (flag == "--model") {
      o->model_dir = v;
    } else if (flag == "--configs") {
      std::stringstream ss(v);
      std::string item;
      o->configs.clear();
      while (std::getline(ss, item, ',')) o->configs.push_back(item);
      ok = !o->configs.empty();
    } else if (flag == "--answers") {
      o->answers = v;
    } else if (flag == "--verdicts") {
      o->verdicts = v;
    } else if (flag == "--limit") {
      ok = integer(1, 1 << 24, &o->limit);
    } else if (flag == "--concurrency") {
      ok = integer(1, 256, &o->concurrency);
    } else if (flag == "--max-tokens") {
      ok = integer(1, 1 << 20, &o->max_tokens);
    } else if (flag == "--threads") {
      ok = integer(1, 256, &o->threads);
    } else {
      return "unknown flag " + flag;
    }
    if (!ok) return flag + ": bad value '" + v + "'";
  }
  if (o->suites.empty()) return "--suite is required";
  if (o->sub == "tools") {
    if (o->url.empty() == o->model_dir.empty()) return "give --url or --model (one of them)";
    if (!o->url.empty() && !o->configs.empty())
      return "--configs needs --model (a --url is one configuration)";
  } else if (o->answers.empty()) {
    return "--answers is required";
  }
  return "";
}

Cell Percent(double ratio) { return ratio < 0 ? Cell{"–", ""} : Num(100 * ratio, 1); }

std::vector<Cell> MetricCells(const ToolMetrics& m) {
  return {Num(static_cast<double>(m.cases)), Num(static_cast<double>(m.failed)),
          Num(static_cast<double>(m.calls)), Percent(m.validity),
          Percent(m.trigger_precision),      Percent(m.trigger_recall),
          Percent(m.argument_accuracy),      Percent(m.accuracy)};
}

const std::vector<std::string>& MetricColumns() {
  static const std::vector<std::string> kColumns = {"cases",
                                                    "failed",
                                                    "calls",
                                                    "validity %",
                                                    "trigger precision %",
                                                    "trigger recall %",
                                                    "argument accuracy %",
                                                    "accuracy %"};
  return kColumns;
}

StatusOr<std::vector<CaseAnswer>> LoadAnswers(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status::NotFound("answers " + path + ": cannot open");
  std::vector<CaseAnswer> out;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const Json j =
        JsonDepthWithin(line, 64) ? Json::parse(line, nullptr, false) : Json(Json::value_t::discarded);
    if (j.is_discarded()) return Status::InvalidArgument(path + ":" + std::to_string(n) + ": not valid JSON");
    StatusOr<CaseAnswer> a = eval::AnswerFromJson(j);
    if (!a.ok()) return Status::InvalidArgument(path + ":" + std::to_string(n) + ": " + a.status().message());
    out.push_back(std::move(*a));
  }
  return out;
}

// Scores answers against their cases by id; a case with no answer counts as a failed request.
std::vector<CaseScore> ScoreAll(const std::vector<ToolCase>& cases, const std::vector<CaseAnswer>& answers) {
  std::map<std::string, const CaseAnswer*> by_id;
  for (const CaseAnswer& a : answers) by_id[a.id] = &a;
  std::vector<CaseScore> scores;
  for (const ToolCase& c : cases) {
    const auto it = by_id.find(c.id);
    CaseAnswer missing;
    missing.id = c.id;
    missing.error = "no answer recorded";
    scores.push_back(eval::ScoreCase(c, it == by_id.end() ? missing : *it->second));
  }
  return scores;
}

Status WriteLines(const std::string& path, const std::vector<Json>& lines) {
  std::ofstream out(path);
  if (!out) return Status::Unavailable("cannot write " + path);
  for (const Json& j : lines) out << j.dump() << "\n";
  return out ? Status::Ok() : Status::Unavailable("writing " + path + " failed");
}

std::string SuiteName(const std::string& path) { return fs::path(path).stem().string(); }

struct Target {
  std::string label;
  std::unique_ptr<LocalStack> stack;  // null for --url
  Endpoint endpoint;
  std::string model;
};

int RunScore(const Options& o) {
  const StatusOr<std::vector<ToolCase>> cases = eval::LoadToolSuite(o.suites[0]);
  if (!cases.ok()) {
    std::fprintf(stderr, "tandem eval score: %s\n", cases.status().ToString().c_str());
    return 1;
  }
  const StatusOr<std::vector<CaseAnswer>> answers = LoadAnswers(o.answers);
  if (!answers.ok()) {
    std::fprintf(stderr, "tandem eval score: %s\n", answers.status().ToString().c_str());
    return 1;
  }
  const std::vector<CaseScore> scores = ScoreAll(*cases, *answers);
  if (!o.verdicts.empty()) {
    std::vector<Json> lines;
    for (const CaseScore& s : scores) lines.push_back(eval::ScoreToJson(s));
    if (const Status st = WriteLines(o.verdicts, lines); !st.ok()) {
      std::fprintf(stderr, "tandem eval score: %s\n", st.ToString().c_str());
      return 1;
    }
  }
  Table t;
  t.columns = MetricColumns();
  t.rows.push_back(MetricCells(eval::Aggregate(scores)));
  std::printf("%s", t.Markdown().c_str());
  return 0;
}

int RunTools(const Options& o) {
  std::vector<std::pair<std::string, std::vector<ToolCase>>> suites;
  for (const std::string& path : o.suites) {
    StatusOr<std::vector<ToolCase>> cases = eval::LoadToolSuite(path);
    if (!cases.ok()) {
      std::fprintf(stderr, "tandem eval tools: %s\n", cases.status().ToString().c_str());
      return 1;
    }
    if (o.limit > 0 && static_cast<int>(cases->size()) > o.limit) cases->resize(static_cast<size_t>(o.limit));
    suites.emplace_back(SuiteName(path), std::move(*cases));
  }
  std::vector<eval::PrecisionConfig> configs;
  if (!o.model_dir.empty()) {
    StatusOr<std::vector<eval::PrecisionConfig>> picked =
        eval::PickConfigs(o.configs.empty() ? eval::DefaultConfigNames() : o.configs);
    if (!picked.ok()) {
      std::fprintf(stderr, "tandem eval tools: %s\n%s", picked.status().message().c_str(), kUsage);
      return 2;
    }
    configs = std::move(*picked);
  } else {
    configs.push_back({"endpoint", "the server at " + o.url, {}});
  }
  Report report;
  report.experiment = "tools";
  report.title = "Tool calling: validity, trigger precision/recall, argument accuracy";
  report.paragraphs.push_back(
      "Each case is one chat completion (its messages and tools, tool_choice auto, temperature 0). "
      "Validity: calls that parse, name an offered tool and satisfy its JSON schema, over calls made "
      "(tool-call markup the server could not parse counts as an invalid call). Trigger: called where "
      "a call was right (precision over cases that called, recall over cases wanting a call). "
      "Argument accuracy: cases wanting a call answered exactly (BFCL's AST checker's rules). "
      "Accuracy: every case judged right, no-call cases included.");
  Table main;
  main.columns = {"suite", "configuration"};
  main.columns.insert(main.columns.end(), MetricColumns().begin(), MetricColumns().end());
  Table categories;
  categories.title = "Accuracy by category";
  categories.columns = {"suite", "configuration", "category", "cases", "validity %", "accuracy %"};
  std::map<std::string, double> first_validity;  // suite -> the first configuration's validity
  for (const eval::PrecisionConfig& config : configs) {
    Target target;
    target.label = config.name;
    if (o.url.empty()) {
      LocalStackOptions so;
      so.model_dir = o.model_dir;
      so.out_dir = o.out;
      so.label = "eval-" + config.name;
      so.threads = o.threads;
      so.extra = config.local_flags;
      std::fprintf(stderr, "tandem eval: starting tandem local (%s: %s)\n", config.name.c_str(),
                   config.description.c_str());
      StatusOr<std::unique_ptr<LocalStack>> stack = LocalStack::Start(so);
      if (!stack.ok()) {
        std::fprintf(stderr, "tandem eval tools: %s\n", stack.status().ToString().c_str());
        return 1;
      }
      target.stack = std::move(*stack);
      target.endpoint = target.stack->endpoint();
      target.model = target.stack->model();
    } else {
      StatusOr<Endpoint> e = ParseEndpoint(o.url, o.api_key);
      if (!e.ok()) {
        std::fprintf(stderr, "tandem eval tools: %s\n", e.status().message().c_str());
        return 2;
      }
      target.endpoint = *e;
      target.model = o.model_name;
      if (target.model.empty()) {
        StatusOr<std::string> m = FirstModel(target.endpoint);
        if (!m.ok()) {
          std::fprintf(stderr, "tandem eval tools: %s\n", m.status().ToString().c_str());
          return 1;
        }
        target.model = *m;
      }
    }
    for (const auto& [suite, cases] : suites) {
      std::fprintf(stderr, "tandem eval: %s on %s (%zu cases)\n", suite.c_str(), config.name.c_str(),
                   cases.size());
      eval::RunOptions ro;
      ro.model = target.model;
      ro.max_tokens = o.max_tokens;
      ro.concurrency = o.concurrency;
      const std::vector<CaseAnswer> answers = eval::RunToolSuite(target.endpoint, cases, ro);
      const std::vector<CaseScore> scores = ScoreAll(cases, answers);
      std::vector<Json> answer_lines;
      for (const CaseAnswer& a : answers) answer_lines.push_back(eval::AnswerToJson(a));
      std::error_code ec;
      fs::create_directories(o.out, ec);
      const std::string answers_path = o.out + "/tools-" + suite + "-" + config.name + ".answers.jsonl";
      if (const Status st = WriteLines(answers_path, answer_lines); !st.ok()) {
        std::fprintf(stderr, "tandem eval tools: %s\n", st.ToString().c_str());
        return 1;
      }
      const ToolMetrics m = eval::Aggregate(scores);
      std::vector<Cell> row = {Text(suite), Text(config.name)};
      for (Cell& c : MetricCells(m)) row.push_back(std::move(c));
      main.rows.push_back(std::move(row));
      std::map<std::string, std::vector<CaseScore>> by_category;
      for (const CaseScore& s : scores) by_category[s.category.empty() ? "-" : s.category].push_back(s);
      for (const auto& [category, in] : by_category) {
        const ToolMetrics cm = eval::Aggregate(in);
        categories.rows.push_back({Text(suite), Text(config.name), Text(category),
                                   Num(static_cast<double>(cm.cases)), Percent(cm.validity),
                                   Percent(cm.accuracy)});
      }
      Json sample = {{"suite", suite}, {"configuration", config.name}, {"metrics", eval::MetricsToJson(m)}};
      sample["cases"] = Json::array();
      for (const CaseScore& s : scores) sample["cases"].push_back(eval::ScoreToJson(s));
      report.samples.push_back(std::move(sample));
      if (m.validity >= 0) {
        if (!first_validity.count(suite)) {
          first_validity[suite] = m.validity;
        } else {
          bench::Target t;
          t.name = "validity drop, " + suite + ": " + config.name + " vs " + configs.front().name;
          t.value = 100 * (first_validity[suite] - m.validity);
          t.threshold = 0.5;
          t.at_least = false;
          t.unit = " points";
          t.production = "+0.4 (FP8 KV, Kimi K2.6)";
          report.targets.push_back(t);
        }
      }
    }
  }
  report.tables = {main, categories};
  report.config = {{"suites", o.suites},           {"limit", o.limit}, {"max_tokens", o.max_tokens},
                   {"concurrency", o.concurrency}, {"url", o.url},     {"model_dir", o.model_dir}};
  report.config["configurations"] = Json::array();
  for (const eval::PrecisionConfig& c : configs) {
    report.config["configurations"].push_back(
        {{"name", c.name}, {"description", c.description}, {"flags", c.local_flags}});
  }
  StatusOr<std::vector<std::string>> files = bench::WriteReport(report, o.out);
  if (!files.ok()) {
    std::fprintf(stderr, "tandem eval tools: %s\n", files.status().ToString().c_str());
    return 1;
  }
  std::printf("\n%s\n%s\n", main.Markdown().c_str(), categories.Markdown().c_str());
  for (const bench::Target& t : report.targets) {
    std::printf("target: %s: %.2f (wanted <= %.2f) %s\n", t.name.c_str(), t.value, t.threshold,
                t.Met() ? "met" : "MISSED");
  }
  for (const std::string& f : *files) std::printf("wrote %s\n", f.c_str());
  return 0;
}

}  // namespace

int RunEval(const std::vector<std::string>& args) {
  if (args.empty() || args[0] == "--help") {
    std::fprintf(args.empty() ? stderr : stdout, "%s", kUsage);
    return args.empty() ? 2 : 0;
  }
  Options o;
  o.sub = args[0];
  if (o.sub != "tools" && o.sub != "score") {
    std::fprintf(stderr, "tandem eval: unknown subcommand '%s'\n%s", o.sub.c_str(), kUsage);
    return 2;
  }
  if (const std::string err = ParseArgs(std::vector<std::string>(args.begin() + 1, args.end()), &o);
      !err.empty()) {
    std::fprintf(stderr, "tandem eval %s: %s\n%s", o.sub.c_str(), err.c_str(), kUsage);
    return 2;
  }
  return o.sub == "tools" ? RunTools(o) : RunScore(o);
}

}  // namespace tandem::tools
