// `tandem eval tools|score|fidelity`: tool-call validity, trigger precision/recall and argument
// accuracy of a model behind any OpenAI-compatible endpoint, or of a model directory served by
// `tandem local` in each precision configuration side by side; and the fidelity of every precision
// configuration of a checkpoint to its BF16 reference (docs/eval.md).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "common/json_depth.h"
#include "engine/model/model_config.h"
#include "engine/model/model_dir.h"
#include "engine/text/chat_template.h"
#include "tools/bench/report.h"
#include "tools/commands.h"
#include "tools/eval/configs.h"
#include "tools/eval/fidelity.h"
#include "tools/eval/tool_runner.h"
#include "tools/eval/tool_suite.h"
#include "tools/local_stack.h"
#include "tools/make_model.h"

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
    "usage: tandem eval <tools|score|fidelity> [flags]\n"
    "  tools   run tool-calling suites through the OpenAI chat API and score them\n"
    "          --suite FILE (JSONL; repeat for several)  --out DIR (eval-results)\n"
    "          --url [LABEL=]http://HOST:PORT (repeat: servers side by side) --api-key KEY --model-name "
    "NAME\n"
    "          | --model DIR [--configs bf16,fp8-kv,int4,fp8,pd-split] [--threads N]   (tandem local, one\n"
    "            stack per precision configuration)\n"
    "          --limit N (first N cases of each suite)  --concurrency N (4)  --max-tokens N (256)\n"
    "          --summary FILE (JSON: each configuration's figures over every suite)\n"
    "          --unknown-tool-calls drop|forward (with --model: whether the stacks drop calls to functions\n"
    "            a case did not offer, the agents' default, or pass them on to be scored; drop)\n"
    "  score   score recorded answers (JSONL, as `tools` writes them) without a server\n"
    "          --suite FILE --answers FILE [--verdicts FILE (one scored case per line)]\n"
    "  fidelity  every precision configuration of a checkpoint against its BF16 reference: per-token KL,\n"
    "          top-1 agreement, greedy exact-match length, perplexity\n"
    "          --model DIR  [--prompts FILE (a suite's JSONL, chat-rendered, or text lines; default\n"
    "          DIR/heldout.jsonl)] [--limit N (24)] [--text FILE (perplexity; default the tiny corpus)]\n"
    "          [--continuation N (32)] [--configs bf16,fp8-kv,fp8,fp8+fp8-kv,int4,int4+fp8-kv,pd-split]\n"
    "          [--threads N] [--out DIR]\n";

struct Options {
  std::string sub;
  std::vector<std::string> suites;
  std::string out = "eval-results";
  std::vector<std::pair<std::string, std::string>> urls;  // (label, url)
  std::string api_key, model_name, model_dir, summary;
  std::vector<std::string> configs;
  std::string answers, verdicts;
  std::string prompts, text;
  int limit = 0, concurrency = 4, max_tokens = 256, threads = 1, continuation = 32;
  bool forward_unknown_tool_calls = false;  // --unknown-tool-calls forward
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
      const size_t eq = v.find('=');
      const bool labelled = eq != std::string::npos && v.rfind("http", 0) != 0;
      o->urls.emplace_back(labelled ? v.substr(0, eq) : "endpoint", labelled ? v.substr(eq + 1) : v);
      ok = !o->urls.back().first.empty();
    } else if (flag == "--summary") {
      o->summary = v;
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
    } else if (flag == "--prompts") {
      o->prompts = v;
    } else if (flag == "--text") {
      o->text = v;
    } else if (flag == "--continuation") {
      ok = integer(1, 4096, &o->continuation);
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
    } else if (flag == "--unknown-tool-calls") {
      ok = v == "drop" || v == "forward";
      o->forward_unknown_tool_calls = v == "forward";
    } else {
      return "unknown flag " + flag;
    }
    if (!ok) return flag + ": bad value '" + v + "'";
  }
  if (o->sub == "fidelity") return o->model_dir.empty() ? "--model is required" : "";
  if (o->suites.empty()) return "--suite is required";
  if (o->sub == "tools") {
    if (o->urls.empty() == o->model_dir.empty()) return "give --url or --model (one of them)";
    if (!o->urls.empty() && !o->configs.empty())
      return "--configs needs --model (each --url is one configuration)";
    for (size_t i = 0; i < o->urls.size(); ++i) {
      for (size_t j = 0; j < i; ++j) {
        if (o->urls[i].first == o->urls[j].first)
          return "--url: label '" + o->urls[i].first + "' given twice";
      }
    }
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
    for (const auto& [label, url] : o.urls) configs.push_back({label, "the server at " + url, {}});
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
  std::map<std::string, double> first_validity;              // suite -> the first configuration's validity
  std::map<std::string, std::vector<CaseScore>> all_scores;  // configuration -> every suite's scores
  for (size_t ci = 0; ci < configs.size(); ++ci) {
    const eval::PrecisionConfig& config = configs[ci];
    Target target;
    target.label = config.name;
    if (o.urls.empty()) {
      LocalStackOptions so;
      so.model_dir = o.model_dir;
      so.out_dir = o.out;
      so.label = "eval-" + config.name;
      so.threads = o.threads;
      so.extra = config.local_flags;
      if (o.forward_unknown_tool_calls) so.extra.push_back("--forward-unknown-tool-calls");
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
      StatusOr<Endpoint> e = ParseEndpoint(o.urls[ci].second, o.api_key);
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
      all_scores[config.name].insert(all_scores[config.name].end(), scores.begin(), scores.end());
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
                   {"concurrency", o.concurrency}, {"urls", o.urls},   {"model_dir", o.model_dir}};
  report.config["unknown_tool_calls"] = o.forward_unknown_tool_calls ? "forward" : "drop";
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
  if (!o.summary.empty()) {
    // Compact, for a Pod's termination message (4 KiB): each configuration's figures.
    Json summary = Json::object();
    for (const auto& [name, scores] : all_scores)
      summary[name] = eval::MetricsToJson(eval::Aggregate(scores));
    std::ofstream out(o.summary);
    out << summary.dump() << "\n";
    if (!out) {
      std::fprintf(stderr, "tandem eval tools: cannot write %s\n", o.summary.c_str());
      return 1;
    }
  }
  std::printf("\n%s\n%s\n", main.Markdown().c_str(), categories.Markdown().c_str());
  for (const bench::Target& t : report.targets) {
    std::printf("target: %s: %.2f (wanted <= %.2f) %s\n", t.name.c_str(), t.value, t.threshold,
                t.Met() ? "met" : "MISSED");
  }
  for (const std::string& f : *files) std::printf("wrote %s\n", f.c_str());
  return 0;
}

// Prompts as token ids: a suite's cases rendered with the model's chat template (with their
// tools), or the lines of a text file as they are.
StatusOr<std::vector<std::vector<int32_t>>> FidelityPrompts(const std::string& path, int limit,
                                                            const engine::model::ModelTokens& tokens) {
  std::vector<std::vector<int32_t>> out;
  if (path.size() > 6 && path.compare(path.size() - 6, 6, ".jsonl") == 0) {
    ASSIGN_OR_RETURN(const std::vector<ToolCase> cases, eval::LoadToolSuite(path));
    for (const ToolCase& c : cases) {
      if (static_cast<int>(out.size()) >= limit) break;
      engine::text::ChatRequest chat;
      for (const Json& t : c.tools) chat.tools_json.push_back(t.dump());
      for (const Json& m : c.messages) {
        engine::text::ChatMessage msg;
        const std::string role = m["role"].get<std::string>();
        msg.role = role == "system"      ? engine::text::ChatRole::kSystem
                   : role == "assistant" ? engine::text::ChatRole::kAssistant
                   : role == "tool"      ? engine::text::ChatRole::kTool
                                         : engine::text::ChatRole::kUser;
        msg.content =
            m.contains("content") && m["content"].is_string() ? m["content"].get<std::string>() : "";
        chat.messages.push_back(std::move(msg));
      }
      ASSIGN_OR_RETURN(const std::string prompt, engine::text::RenderChat(tokens.chat_family, chat));
      out.push_back(tokens.tokenizer->Encode(prompt));
    }
    return out;
  }
  std::ifstream in(path);
  if (!in) return Status::NotFound("prompts " + path + ": cannot open");
  std::string line;
  while (static_cast<int>(out.size()) < limit && std::getline(in, line)) {
    if (!line.empty()) out.push_back(tokens.tokenizer->Encode(line, /*parse_special=*/false));
  }
  return out;
}

int RunFidelityCommand(const Options& o) {
  auto fail = [](const Status& s) {
    std::fprintf(stderr, "tandem eval fidelity: %s\n", s.ToString().c_str());
    return 1;
  };
  for (const std::string& name : o.configs) {
    bool known = false;
    for (const eval::FidelityConfig& c : eval::FidelityConfigs()) known = known || c.name == name;
    if (!known) {
      std::fprintf(stderr, "tandem eval fidelity: unknown configuration '%s'\n%s", name.c_str(), kUsage);
      return 2;
    }
  }
  const StatusOr<engine::model::ModelConfig> config = engine::model::LoadModelConfig(o.model_dir);
  if (!config.ok()) return fail(config.status());
  const StatusOr<engine::model::ModelTokens> tokens = engine::model::LoadModelTokens(o.model_dir, *config);
  if (!tokens.ok()) return fail(tokens.status());
  eval::FidelityOptions fo;
  fo.model_dir = o.model_dir;
  fo.continuation_tokens = o.continuation;
  fo.threads = o.threads;
  fo.configs = o.configs;
  const std::string prompts = o.prompts.empty() ? o.model_dir + "/heldout.jsonl" : o.prompts;
  StatusOr<std::vector<std::vector<int32_t>>> ids =
      FidelityPrompts(prompts, o.limit > 0 ? o.limit : 24, *tokens);
  if (!ids.ok()) return fail(ids.status());
  fo.prompts = std::move(*ids);
  std::string text(TinyCorpus().substr(0, 16384));
  if (!o.text.empty()) {
    std::ifstream in(o.text, std::ios::binary);
    if (!in) return fail(Status::NotFound("text " + o.text + ": cannot open"));
    text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  fo.text = tokens->tokenizer->Encode(text, /*parse_special=*/false);
  const StatusOr<std::vector<eval::FidelityRow>> rows = eval::RunFidelity(fo);
  if (!rows.ok()) return fail(rows.status());

  Report report;
  report.experiment = "fidelity";
  report.title = "Quantization fidelity against the BF16 reference";
  report.paragraphs.push_back(
      "Every configuration runs the same prompts through the engine's forward pass: prefill (expanded MLA) "
      "then decode token by token (absorbed MLA over paged KV). KL and top-1 compare each position's "
      "next-token distribution with the BF16 reference's, on the prompt and on the reference's greedy "
      "continuation (teacher-forced). Exact match: leading tokens of the configuration's own greedy "
      "continuation equal to the reference's. pd-split: prefill with FP8 weights and a BF16 cache, the pages "
      "converted to FP8 e4m3 as a transfer does, decode with INT4 weights; its perplexity is the decode "
      "side's.");
  char line[256];
  std::snprintf(line, sizeof(line), "%zu prompts (%s), %d continuation tokens; perplexity over %zu tokens.",
                fo.prompts.size(), prompts.c_str(), o.continuation, fo.text.size());
  report.paragraphs.push_back(line);
  Table t;
  t.columns = {"configuration",
               "positions",
               "mean KL",
               "KL prompt",
               "KL continuation",
               "p99 KL",
               "max KL",
               "top-1 %",
               "top-1 prompt %",
               "top-1 continuation %",
               "exact-match tokens (mean)",
               "full matches",
               "perplexity"};
  bench::Plot top1{
      "Top-1 agreement with BF16", "configuration (table order)", "top-1 agreement %", false, false, {}};
  bench::Plot kl{"Mean per-token KL divergence from BF16",
                 "configuration (table order)",
                 "mean KL (nats)",
                 false,
                 false,
                 {}};
  bench::Series top1_line{"top-1 agreement %", {}, {}, false}, kl_line{"mean KL", {}, {}, false};
  for (size_t i = 0; i < rows->size(); ++i) {
    const eval::FidelityRow& r = (*rows)[i];
    auto sci = [](double v) {
      char b[32];
      std::snprintf(b, sizeof(b), "%.3g", v);
      return Cell{b, b};
    };
    t.rows.push_back({Text(r.config), Num(static_cast<double>(r.positions)), sci(r.mean_kl), sci(r.prompt_kl),
                      sci(r.continuation_kl), sci(r.p99_kl), sci(r.max_kl), Num(100 * r.top1_agreement, 2),
                      Num(100 * r.prompt_top1, 2), Num(100 * r.continuation_top1, 2),
                      Num(r.mean_exact_match, 1),
                      Text(std::to_string(r.full_matches) + "/" + std::to_string(fo.prompts.size())),
                      Num(r.perplexity, 3)});
    top1_line.x.push_back(static_cast<double>(i + 1));
    top1_line.y.push_back(100 * r.top1_agreement);
    kl_line.x.push_back(static_cast<double>(i + 1));
    kl_line.y.push_back(r.mean_kl);
    report.samples.push_back({{"configuration", r.config},
                              {"positions", r.positions},
                              {"mean_kl", r.mean_kl},
                              {"p99_kl", r.p99_kl},
                              {"max_kl", r.max_kl},
                              {"top1_agreement", r.top1_agreement},
                              {"prompt_kl", r.prompt_kl},
                              {"continuation_kl", r.continuation_kl},
                              {"prompt_top1", r.prompt_top1},
                              {"continuation_top1", r.continuation_top1},
                              {"mean_exact_match", r.mean_exact_match},
                              {"full_matches", r.full_matches},
                              {"perplexity", r.perplexity}});
  }
  top1.series.push_back(top1_line);
  kl.series.push_back(kl_line);
  report.tables = {t};
  report.plots = {top1, kl};
  report.config = {{"model_dir", o.model_dir},
                   {"prompts", prompts},
                   {"continuation", o.continuation},
                   {"text_tokens", fo.text.size()}};
  const StatusOr<std::vector<std::string>> files = bench::WriteReport(report, o.out);
  if (!files.ok()) return fail(files.status());
  std::printf("\n%s\n", t.Markdown().c_str());
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
  if (std::find(args.begin() + 1, args.end(), "--help") != args.end()) {
    std::printf("%s", kUsage);
    return 0;
  }
  if (o.sub != "tools" && o.sub != "score" && o.sub != "fidelity") {
    std::fprintf(stderr, "tandem eval: unknown subcommand '%s'\n%s", o.sub.c_str(), kUsage);
    return 2;
  }
  if (const std::string err = ParseArgs(std::vector<std::string>(args.begin() + 1, args.end()), &o);
      !err.empty()) {
    std::fprintf(stderr, "tandem eval %s: %s\n%s", o.sub.c_str(), err.c_str(), kUsage);
    return 2;
  }
  if (o.sub == "fidelity") return RunFidelityCommand(o);
  return o.sub == "tools" ? RunTools(o) : RunScore(o);
}

}  // namespace tandem::tools
