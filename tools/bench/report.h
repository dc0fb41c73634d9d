#pragma once
// What every `tandem bench` experiment writes: DIR/<experiment>.md (tables in the shape of
// production's, the targets met or missed, the machine), .csv (the main table, raw numbers),
// .json (machine and build info, the probe bandwidth, the configuration, every sample) and .svg
// (a line plot: one line per configuration, production's figures dashed where they are given).
// Also the machine description and the progress line the experiments share.

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace tandem::tools::bench {

// One table cell: what the Markdown shows and what the CSV holds (raw, unformatted).
struct Cell {
  std::string text;
  std::string raw;
};
Cell Text(const std::string& s);
Cell Num(double v, int decimals = 0);  // "1,234.5" / "1234.5"
Cell Ratio(double v);                  // "1.23x" / "1.2300"
Cell Bytes(double v);                  // "1.23 GB" / "1230000000"

struct Table {
  std::string title;  // a "###" heading; empty for none
  std::vector<std::string> columns;
  std::vector<std::vector<Cell>> rows;
  std::string Markdown() const;
  std::string Csv() const;
};

// A target from the issue, checked against this run's figure.
struct Target {
  std::string name;        // "FP8/BF16 KV token capacity (Kimi)"
  double value = 0;        // this run's figure
  double threshold = 0;    // the target
  bool at_least = true;    // value >= threshold (else value <= threshold)
  std::string unit = "x";  // how value and threshold print: "x", "%"
  std::string production;  // production's figure, for the table
  bool Met() const { return at_least ? value >= threshold : value <= threshold; }
};

struct Series {
  std::string name;
  std::vector<double> x, y;  // same length; a missing point (out of memory) is simply absent
  bool reference = false;    // drawn dashed (production's figures)
};

struct Plot {
  std::string title, x_label, y_label;
  bool log_x = false, log_y = false;
  std::vector<Series> series;
};

// A standalone SVG document of the plot (axes, ticks, a legend; 800 x 480).
std::string PlotSvg(const Plot& plot);

// Production's series scaled so its peak equals `peak` (a shape reference, labelled with the
// factor); a series whose peak is not positive is returned unchanged.
Series ScaledReference(const std::string& name, std::vector<double> x, std::vector<double> y, double peak);

struct Report {
  std::string experiment;  // "kv-decode": the file names
  std::string title;
  std::vector<std::string> paragraphs;  // Markdown, before the tables
  std::vector<Table> tables;            // tables[0] is the CSV's
  std::vector<Target> targets;
  std::vector<Plot> plots;  // plots[0] is DIR/<experiment>.svg, plots[i] <experiment>-i.svg
  nlohmann::json config = nlohmann::json::object();
  nlohmann::json samples = nlohmann::json::array();
};

// The machine: CPU model, cores, features, kernel ISAs in use, build, load average, the read
// bandwidth probe (measured once per process, ~1 s, 512 MiB).
nlohmann::json MachineInfo();

// Writes the report's files into `dir` (created if missing) and returns their paths.
StatusOr<std::vector<std::string>> WriteReport(const Report& report, const std::string& dir);

// A one-line progress bar on stderr ("\r" redrawn on a terminal, a line per step otherwise).
class Progress {
 public:
  Progress(std::string label, int64_t total);
  ~Progress();
  void Step(const std::string& what);  // one unit done; `what` names the next or the current
 private:
  std::string label_;
  int64_t total_, done_ = 0;
  bool tty_;
  int64_t start_ns_;
};

// "median of" helpers for samples.
double Median(std::vector<double> v);
double Percentile(std::vector<double> v, double p);  // p in [0, 100], linear interpolation

}  // namespace tandem::tools::bench
