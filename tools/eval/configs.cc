#include "tools/eval/configs.h"

namespace tandem::tools::eval {
namespace {

PrecisionConfig Make(std::string name, std::string pw, std::string pkv, std::string dw, std::string dkv) {
  PrecisionConfig c;
  c.name = std::move(name);
  c.description = "prefill " + pw + " weights + " + pkv + " KV, decode " + dw + " weights + " + dkv + " KV";
  c.local_flags = {"--prefill-weights", pw, "--prefill-kv", pkv, "--decode-weights", dw, "--decode-kv", dkv};
  return c;
}

}  // namespace

const std::vector<PrecisionConfig>& AllConfigs() {
  static const std::vector<PrecisionConfig> kAll = {
      Make("bf16", "bf16", "bf16", "bf16", "bf16"),        Make("fp8-kv", "bf16", "bf16", "bf16", "fp8_e4m3"),
      Make("int4", "bf16", "bf16", "int4", "bf16"),        Make("fp8", "fp8", "bf16", "fp8", "bf16"),
      Make("pd-split", "fp8", "bf16", "int4", "fp8_e4m3"),
  };
  return kAll;
}

std::vector<std::string> DefaultConfigNames() { return {"bf16", "fp8-kv", "int4", "pd-split"}; }

StatusOr<std::vector<PrecisionConfig>> PickConfigs(const std::vector<std::string>& names) {
  std::vector<PrecisionConfig> out;
  for (const std::string& n : names) {
    const PrecisionConfig* found = nullptr;
    for (const PrecisionConfig& c : AllConfigs()) {
      if (c.name == n) found = &c;
    }
    if (found == nullptr) {
      std::string known;
      for (const PrecisionConfig& c : AllConfigs()) known += (known.empty() ? "" : ", ") + c.name;
      return Status::InvalidArgument("unknown configuration '" + n + "' (known: " + known + ")");
    }
    out.push_back(*found);
  }
  return out;
}

}  // namespace tandem::tools::eval
