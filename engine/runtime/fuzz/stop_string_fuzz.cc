// libFuzzer target for OutputProcessor's stop-string matching (scripts/fuzz.sh stop_string).
// Input: byte 0 picks how many stop strings (1-4) follow, each as a length byte and its bytes; the
// rest is the generated text, streamed token by token through a small byte-level BPE tokenizer.
// Invariants: Create fails exactly when a stop string is empty or invalid UTF-8; every delta is
// valid UTF-8; the deltas concatenate to the text cut before the first-ending (then longest) stop
// string match in the lossy UTF-8 decoding of the bytes; a kStop finish names that string.

#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "engine/runtime/output_processor.h"
#include "engine/runtime/sampler.h"
#include "engine/runtime/stop_reference.h"
#include "engine/text/detokenizer.h"
#include "engine/text/fuzz/fixed_tokenizer.h"
#include "engine/text/tokenizer.h"

namespace {

using tandem::engine::runtime::FinishReason;
using tandem::engine::runtime::OutputProcessor;
using tandem::engine::runtime::RequestOutput;
using tandem::engine::runtime::SamplingParams;
using tandem::engine::text::Tokenizer;
using tandem::engine::text::ToValidUtf8;

void Require(bool condition) {
  if (!condition) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::string_view in(reinterpret_cast<const char*>(data), size);
  SamplingParams p;
  p.max_tokens = 1 << 20;
  bool valid = true;
  const int count = 1 + (static_cast<uint8_t>(in[0]) & 3);
  in.remove_prefix(1);
  for (int i = 0; i < count && !in.empty(); ++i) {
    const size_t len = std::min<size_t>(static_cast<uint8_t>(in[0]) % 16, in.size() - 1);
    p.stop.emplace_back(in.substr(1, len));
    valid = valid && len > 0 && ToValidUtf8(p.stop.back()) == p.stop.back();
    in.remove_prefix(1 + len);
  }
  const Tokenizer& tok = tandem::engine::text::FixedFuzzTokenizer();
  auto op = OutputProcessor::Create(p, &tok, {});
  Require(op.ok() == valid);
  if (!valid) return 0;

  const std::string text(in);
  std::string matched;
  const std::string want = tandem::engine::runtime::ReferenceStopCut(ToValidUtf8(text), p.stop, &matched);
  std::string got;
  RequestOutput last;
  for (int32_t id : tok.Encode(text, /*parse_special=*/false)) {
    RequestOutput out;
    Require(op->Append(id, &out).ok());
    Require(ToValidUtf8(out.text_delta) == out.text_delta);
    got += out.text_delta;
    last = out;
    if (op->finished()) break;
  }
  if (!op->finished()) {
    RequestOutput end;
    op->Finish(FinishReason::kCancelled, "", &end);
    Require(ToValidUtf8(end.text_delta) == end.text_delta);
    got += end.text_delta;
    last = end;
  }
  Require(got == want);
  if (last.finish == FinishReason::kStop) Require(last.finish_detail == matched);
  return 0;
}
