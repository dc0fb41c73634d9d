#include "tools/bench/report.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>

#include <sys/utsname.h>
#include <unistd.h>

#include "engine/bench/read_bandwidth.h"
#include "engine/core/accelerator.h"
#include "engine/core/cpu_features.h"
#include "engine/kernels/cpu/matmul.h"

#ifndef TANDEM_VERSION
#define TANDEM_VERSION "dev"
#endif

namespace tandem::tools::bench {
namespace {

std::string Format(const char* fmt, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), fmt, v);
  return buf;
}

// 1234567.8 with `decimals` -> "1,234,567.8".
std::string Grouped(double v, int decimals) {
  std::string s = Format(("%." + std::to_string(decimals) + "f").c_str(), std::fabs(v));
  const size_t dot = s.find('.');
  std::string whole = s.substr(0, dot), frac = dot == std::string::npos ? "" : s.substr(dot);
  std::string out;
  for (size_t i = 0; i < whole.size(); ++i) {
    if (i > 0 && (whole.size() - i) % 3 == 0) out += ',';
    out += whole[i];
  }
  return (v < 0 ? "-" : "") + out + frac;
}

std::string CsvField(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

std::string Xml(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '<')
      out += "&lt;";
    else if (c == '>')
      out += "&gt;";
    else if (c == '&')
      out += "&amp;";
    else if (c == '"')
      out += "&quot;";
    else
      out += c;
  }
  return out;
}

std::string ReadFirstLine(const std::string& path, const std::string& prefix) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (prefix.empty()) return line;
    if (line.rfind(prefix, 0) == 0) {
      const size_t colon = line.find(':');
      return colon == std::string::npos ? line : line.substr(line.find_first_not_of(" \t", colon + 1));
    }
  }
  return "";
}

std::string UtcNow() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// Axis ticks: "nice" steps (1, 2, 5 x 10^k) on a linear axis, powers of two (or ten) on a log one.
std::vector<double> Ticks(double lo, double hi, bool log) {
  std::vector<double> t;
  if (log) {
    const double base = hi / lo > 4096 ? 10 : 2;
    for (double v = std::pow(base, std::floor(std::log(lo) / std::log(base))); v <= hi * 1.0001; v *= base)
      if (v >= lo * 0.9999) t.push_back(v);
    return t;
  }
  const double raw = (hi - lo) / 5;
  const double mag = std::pow(10, std::floor(std::log10(raw)));
  const double step = raw / mag < 1.5   ? mag
                      : raw / mag < 3.5 ? 2 * mag
                      : raw / mag < 7.5 ? 5 * mag
                                        : 10 * mag;
  for (double v = std::ceil(lo / step) * step; v <= hi + step * 1e-6; v += step) t.push_back(v);
  return t;
}

std::string TickLabel(double v) {
  const double a = std::fabs(v);
  if (a >= 1e6) return Format("%.3gM", v / 1e6);
  if (a >= 1e4) return Format("%.3gk", v / 1e3);
  return Format("%g", v);
}

}  // namespace

Cell Text(const std::string& s) { return {s, s}; }
Cell Num(double v, int decimals) { return {Grouped(v, decimals), Format("%.6g", v)}; }
Cell Ratio(double v) { return {Format("%.3fx", v), Format("%.6g", v)}; }
Cell Bytes(double v) {
  const char* unit = v >= 1e9 ? "GB" : v >= 1e6 ? "MB" : v >= 1e3 ? "kB" : "B";
  const double div = v >= 1e9 ? 1e9 : v >= 1e6 ? 1e6 : v >= 1e3 ? 1e3 : 1;
  return {Format("%.2f ", v / div) + unit, Format("%.0f", v)};
}

std::string Table::Markdown() const {
  std::string out = title.empty() ? "" : "### " + title + "\n\n";
  out += "|";
  for (const std::string& c : columns) out += " " + c + " |";
  out += "\n|";
  for (size_t i = 0; i < columns.size(); ++i) out += "---|";
  out += "\n";
  for (const auto& row : rows) {
    out += "|";
    for (const Cell& c : row) out += " " + c.text + " |";
    out += "\n";
  }
  return out;
}

std::string Table::Csv() const {
  std::string out;
  for (size_t i = 0; i < columns.size(); ++i) out += (i ? "," : "") + CsvField(columns[i]);
  out += "\n";
  for (const auto& row : rows) {
    for (size_t i = 0; i < row.size(); ++i) out += (i ? "," : "") + CsvField(row[i].raw);
    out += "\n";
  }
  return out;
}

Series ScaledReference(const std::string& name, std::vector<double> x, std::vector<double> y, double peak) {
  Series s{name, std::move(x), std::move(y), true};
  const double max = s.y.empty() ? 0 : *std::max_element(s.y.begin(), s.y.end());
  if (max <= 0 || peak <= 0) return s;
  const double f = peak / max;
  for (double& v : s.y) v *= f;
  s.name += " (scaled x" + Format("%.3g", f) + ")";
  return s;
}

std::string PlotSvg(const Plot& plot) {
  constexpr double kW = 800, kH = 480, kLeft = 80, kRight = 230, kTop = 50, kBottom = 60;
  constexpr const char* kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"};
  double xlo = INFINITY, xhi = -INFINITY, ylo = INFINITY, yhi = -INFINITY;
  for (const Series& s : plot.series) {
    for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
      if ((plot.log_x && s.x[i] <= 0) || (plot.log_y && s.y[i] <= 0)) continue;
      xlo = std::min(xlo, s.x[i]);
      xhi = std::max(xhi, s.x[i]);
      ylo = std::min(ylo, s.y[i]);
      yhi = std::max(yhi, s.y[i]);
    }
  }
  if (!(xlo <= xhi)) xlo = 0, xhi = 1, ylo = 0, yhi = 1;
  if (xhi == xlo) xhi = xlo + 1;
  if (!plot.log_y) ylo = std::min(0.0, ylo);
  if (yhi == ylo) yhi = ylo + 1;
  if (!plot.log_y) yhi *= 1.05;
  const auto tx = [&](double v) {
    const double f = plot.log_x ? std::log(v / xlo) / std::log(xhi / xlo) : (v - xlo) / (xhi - xlo);
    return kLeft + f * (kW - kLeft - kRight);
  };
  const auto ty = [&](double v) {
    const double f = plot.log_y ? std::log(v / ylo) / std::log(yhi / ylo) : (v - ylo) / (yhi - ylo);
    return kH - kBottom - f * (kH - kTop - kBottom);
  };
  std::ostringstream o;
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << kW << "\" height=\"" << kH
    << "\" viewBox=\"0 0 " << kW << " " << kH << "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  o << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  o << "<text x=\"" << kW / 2 << "\" y=\"24\" text-anchor=\"middle\" font-size=\"16\">" << Xml(plot.title)
    << "</text>\n";
  // Grid and ticks.
  for (double v : Ticks(xlo, xhi, plot.log_x)) {
    o << "<line x1=\"" << tx(v) << "\" y1=\"" << kTop << "\" x2=\"" << tx(v) << "\" y2=\"" << kH - kBottom
      << "\" stroke=\"#e0e0e0\"/>\n<text x=\"" << tx(v) << "\" y=\"" << kH - kBottom + 18
      << "\" text-anchor=\"middle\">" << TickLabel(v) << "</text>\n";
  }
  for (double v : Ticks(ylo, yhi, plot.log_y)) {
    o << "<line x1=\"" << kLeft << "\" y1=\"" << ty(v) << "\" x2=\"" << kW - kRight << "\" y2=\"" << ty(v)
      << "\" stroke=\"#e0e0e0\"/>\n<text x=\"" << kLeft - 6 << "\" y=\"" << ty(v) + 4
      << "\" text-anchor=\"end\">" << TickLabel(v) << "</text>\n";
  }
  o << "<rect x=\"" << kLeft << "\" y=\"" << kTop << "\" width=\"" << kW - kLeft - kRight << "\" height=\""
    << kH - kTop - kBottom << "\" fill=\"none\" stroke=\"#333\"/>\n";
  o << "<text x=\"" << (kLeft + kW - kRight) / 2 << "\" y=\"" << kH - 16 << "\" text-anchor=\"middle\">"
    << Xml(plot.x_label) << "</text>\n";
  o << "<text transform=\"translate(20," << (kTop + kH - kBottom) / 2
    << ") rotate(-90)\" text-anchor=\"middle\">" << Xml(plot.y_label) << "</text>\n";
  // Lines, markers, legend. A configuration and its reference share a colour.
  int color = 0;
  for (size_t k = 0; k < plot.series.size(); ++k) {
    const Series& s = plot.series[k];
    const char* c = kColors[(s.reference ? std::max(0, color - 1) : color) % 6];
    if (!s.reference) ++color;
    std::string points;
    for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
      if ((plot.log_x && s.x[i] <= 0) || (plot.log_y && s.y[i] <= 0)) continue;
      points += Format("%.1f", tx(s.x[i])) + "," + Format("%.1f", ty(s.y[i])) + " ";
      if (!s.reference) {
        o << "<circle cx=\"" << tx(s.x[i]) << "\" cy=\"" << ty(s.y[i]) << "\" r=\"3.5\" fill=\"" << c
          << "\"/>\n";
      }
    }
    o << "<polyline fill=\"none\" stroke=\"" << c << "\" stroke-width=\"" << (s.reference ? 1.5 : 2.5) << "\""
      << (s.reference ? " stroke-dasharray=\"6,4\"" : "") << " points=\"" << points << "\"/>\n";
    const double ly = kTop + 10 + 22.0 * k;
    o << "<line x1=\"" << kW - kRight + 14 << "\" y1=\"" << ly << "\" x2=\"" << kW - kRight + 40 << "\" y2=\""
      << ly << "\" stroke=\"" << c << "\" stroke-width=\"2.5\""
      << (s.reference ? " stroke-dasharray=\"6,4\"" : "") << "/>\n<text x=\"" << kW - kRight + 46 << "\" y=\""
      << ly + 4 << "\" font-size=\"11\">" << Xml(s.name) << "</text>\n";
  }
  o << "</svg>\n";
  return o.str();
}

nlohmann::json MachineInfo() {
  const engine::CpuFeatures& cpu = engine::HostCpuFeatures();
  const engine::AcceleratorInfo acc = engine::QueryAccelerators();
  utsname u{};
  uname(&u);
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  const char* isa_env = std::getenv("TANDEM_ISA");
  nlohmann::json m = {
      {"started_utc", UtcNow()},
      {"host", host},
      {"kernel", std::string(u.sysname) + " " + u.release},
      {"cpu_model", ReadFirstLine("/proc/cpuinfo", "model name")},
      {"logical_cores", cpu.logical_cores},
      {"cpu_features", cpu.ToString()},
      {"widest_kernels", engine::KernelIsaName(engine::HostKernelIsa())},
      {"active_kernels", engine::KernelIsaName(engine::ActiveKernelIsa())},
      {"TANDEM_ISA", isa_env != nullptr ? isa_env : ""},
      {"matmul_decode", engine::kernels::cpu::MatmulIsa()},
      {"matmul_fp8_decode", engine::kernels::cpu::MatmulFp8Decode()},
      {"load_average", ReadFirstLine("/proc/loadavg", "")},
      {"tandem_version", TANDEM_VERSION},
      {"compiler", __VERSION__},
#ifdef NDEBUG
      {"build", "release"},
#else
      {"build", "debug (assertions on: figures are not representative)"},
#endif
      {"backend", "cpu"},
      {"cuda_compiled", acc.cuda_compiled},
      {"cuda_devices", acc.cuda_devices},
  };
  m["read_bandwidth_gb_s"] = engine::bench::MeasuredReadBandwidth() * 1e-9;
  return m;
}

StatusOr<std::vector<std::string>> WriteReport(const Report& report, const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Status::Internal("cannot create " + dir + ": " + ec.message());
  const nlohmann::json machine = MachineInfo();
  std::vector<std::string> written;
  const auto write = [&](const std::string& name, const std::string& text) -> Status {
    const std::string path = (std::filesystem::path(dir) / name).string();
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << text;
    out.close();
    if (!out) return Status::Internal("cannot write " + path);
    written.push_back(path);
    return Status::Ok();
  };
  std::string md = "# " + report.title + "\n\n";
  for (const std::string& p : report.paragraphs) md += p + "\n\n";
  for (size_t i = 0; i < report.plots.size(); ++i) {
    const std::string svg = report.experiment + (i == 0 ? "" : "-" + std::to_string(i)) + ".svg";
    md += "![" + report.plots[i].title + "](" + svg + ")\n\n";
  }
  for (const Table& t : report.tables) md += t.Markdown() + "\n";
  if (!report.targets.empty()) {
    Table t{"Targets", {"target", "this run", "wanted", "production", "met"}, {}};
    for (const Target& g : report.targets) {
      const auto show = [&](double v) {
        if (g.unit == "%") return Format("%.2f%%", v);
        if (g.unit == "x") return Format("%.3fx", v);
        return Format("%.3f", v) + g.unit;  // " points", " ms": the unit the target names
      };
      t.rows.push_back({Text(g.name),
                        {show(g.value), Format("%.6g", g.value)},
                        {(g.at_least ? ">= " : "<= ") + show(g.threshold), Format("%.6g", g.threshold)},
                        Text(g.production.empty() ? "-" : g.production),
                        Text(g.Met() ? "yes" : "**no: missed**")});
    }
    md += t.Markdown() + "\n";
  }
  md += "### Machine\n\n";
  for (const auto& [k, v] : machine.items())
    md += "- " + k + ": " + (v.is_string() ? v.get<std::string>() : v.dump()) + "\n";
  md +=
      "\nEvery figure is from this one run; configurations alternate (A B A B ...) and medians are shown.\n";
  RETURN_IF_ERROR(write(report.experiment + ".md", md));
  if (!report.tables.empty()) RETURN_IF_ERROR(write(report.experiment + ".csv", report.tables[0].Csv()));
  nlohmann::json j = {{"experiment", report.experiment},
                      {"title", report.title},
                      {"machine", machine},
                      {"config", report.config},
                      {"samples", report.samples}};
  j["tables"] = nlohmann::json::array();
  for (const Table& t : report.tables) {
    nlohmann::json rows = nlohmann::json::array();
    for (const auto& row : t.rows) {
      nlohmann::json r = nlohmann::json::object();
      for (size_t i = 0; i < row.size() && i < t.columns.size(); ++i) r[t.columns[i]] = row[i].raw;
      rows.push_back(r);
    }
    j["tables"].push_back({{"title", t.title}, {"columns", t.columns}, {"rows", rows}});
  }
  j["targets"] = nlohmann::json::array();
  for (const Target& g : report.targets) {
    j["targets"].push_back({{"name", g.name},
                            {"value", g.value},
                            {"threshold", g.threshold},
                            {"at_least", g.at_least},
                            {"met", g.Met()},
                            {"production", g.production}});
  }
  RETURN_IF_ERROR(write(report.experiment + ".json", j.dump(2) + "\n"));
  for (size_t i = 0; i < report.plots.size(); ++i) {
    RETURN_IF_ERROR(write(report.experiment + (i == 0 ? "" : "-" + std::to_string(i)) + ".svg",
                          PlotSvg(report.plots[i])));
  }
  return written;
}

namespace {
int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
}  // namespace

Progress::Progress(std::string label, int64_t total)
    : label_(std::move(label)),
      total_(std::max<int64_t>(1, total)),
      tty_(isatty(2) == 1),
      start_ns_(NowNs()) {}

Progress::~Progress() {
  if (tty_) std::fprintf(stderr, "\n");
}

void Progress::Step(const std::string& what) {
  done_ = std::min(total_, done_ + 1);
  const double elapsed = (NowNs() - start_ns_) * 1e-9;
  const double eta = done_ > 0 ? elapsed / done_ * (total_ - done_) : 0;
  constexpr int kWidth = 30;
  const int filled = static_cast<int>(kWidth * done_ / total_);
  std::string bar(filled, '#');
  bar += std::string(kWidth - filled, '.');
  std::fprintf(stderr, "%s%s [%s] %lld/%lld %.0fs (eta %.0fs) %s%s", tty_ ? "\r\033[K" : "", label_.c_str(),
               bar.c_str(), static_cast<long long>(done_), static_cast<long long>(total_), elapsed, eta,
               what.c_str(), tty_ ? "" : "\n");
  std::fflush(stderr);
}

double Median(std::vector<double> v) { return Percentile(std::move(v), 50); }

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double pos = p / 100 * (v.size() - 1);
  const size_t i = static_cast<size_t>(pos);
  if (i + 1 >= v.size()) return v.back();
  return v[i] + (pos - i) * (v[i + 1] - v[i]);
}

}  // namespace tandem::tools::bench
