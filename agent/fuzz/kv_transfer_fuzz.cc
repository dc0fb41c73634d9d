// libFuzzer target for the KV transfer's receiving side: PushKv messages (proto/tandem.proto) as
// a prefill agent, a broken one or an attacker on the pod network sends them, through
// PushKvSession (what DecodeService::PushKv runs per stream) into a decode engine's imports
// (Engine::ReserveImport / WritePage / CommitImport / AbortImport over a real PagePool, with page
// tags on). Built with clang by scripts/fuzz.sh (protoc output in build-fuzz/), not by CMake.
//
// The input drives a run: 1-3 reservations of fuzzed prompt lengths, then operations on up to 4
// streams: a page or trailer message built from a reservation and bent by the input (another
// transfer id, an index past the reservation or anywhere, a tag off by a bit or random, a size off,
// a wrong digest or first token), then serialized, optionally corrupted byte-wise and parsed back
// as the wire would; raw bytes parsed as a message; a stream's close (cancelled or not); an engine
// step. At the end every stream closes and the engine runs its committed requests to completion.
// Invariants beyond "no crash, no sanitizer report, no exception":
// - a page is accepted exactly when its transfer is open, its index is inside the reservation,
//   its size is the layout's page size and its tag is the one issued for that index: a page that
//   is not lands nowhere (the engine's refusal counters move instead);
// - a trailer on an open transfer commits exactly when every page has landed (a refused page
//   resent right counts), the first token is in the vocabulary and the digest is that of the
//   landed bytes; otherwise the transfer is refused and ended, and the stream reports why;
// - after everything ends, every page is free again (no leak, nothing stuck in the ledger), and
//   every committed request produced its finish.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <fuzzer/FuzzedDataProvider.h>

#include "agent/kv_import.h"
#include "common/logging.h"
#include "engine/kv/page_pool.h"
#include "engine/kv/transfer_tags.h"
#include "engine/runtime/engine.h"
#include "engine/runtime/hash_executor.h"

namespace {

namespace rt = tandem::engine::runtime;
namespace kv = tandem::engine::kv;
using tandem::Status;
using tandem::StatusCode;
using tandem::agent::PushKvSession;

constexpr size_t kPageTokens = 4;
constexpr size_t kPages = 24;
constexpr int64_t kVocab = 64;

void Check(bool ok) {
  if (!ok) std::abort();
}

// What the harness knows of a reservation: the oracle for every page and trailer.
struct Reservation {
  rt::ImportReservation r;
  std::vector<std::optional<std::string>> landed;  // bytes accepted per logical page
  bool open = true;
  bool committed = false;
};

struct Stream {
  std::unique_ptr<PushKvSession> session;
  std::optional<uint64_t> transfer;  // what its first message named
  bool refused_page = false;
  bool over = false;
};

Reservation* Find(std::vector<Reservation>& reservations, uint64_t transfer_id) {
  for (Reservation& res : reservations) {
    if (res.r.transfer_id == transfer_id) return &res;
  }
  return nullptr;
}

// The digest the sender sends (KvExport: every byte handed out, whole pages in logical order).
uint64_t DigestOf(const Reservation& res) {
  kv::KvDigest digest;
  for (const auto& page : res.landed) {
    if (!page) return 0;
    digest.Update(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(page->data()), page->size()));
  }
  return digest.Finish();
}

// Applies `message` to stream `s`, checking the outcome against the oracle.
void Apply(std::vector<Reservation>& reservations, Stream& s, const tandem::v1::PushKvMessage& message) {
  if (s.over) return;
  if (!s.transfer) s.transfer = message.transfer_id();
  const bool switched = message.transfer_id() != *s.transfer;
  Reservation* res = Find(reservations, *s.transfer);
  const uint32_t accepted_before = s.session->pages_accepted();
  std::optional<Status> done = s.session->Apply(message);
  if (switched) {
    Check(done && done->code() == StatusCode::kInvalidArgument);
    if (res != nullptr) res->open = false;  // the session aborted it (a no-op if it had ended)
    s.over = true;
    return;
  }
  if (message.has_page()) {
    const auto& page = message.page();
    const bool open = res != nullptr && res->open;
    const bool valid = open && page.logical_page() < res->landed.size() &&
                       page.data().size() == res->r.layout.page_bytes && page.transfer_tag() != 0 &&
                       page.transfer_tag() == res->r.page_tags[page.logical_page()];
    const bool accepted = s.session->pages_accepted() == accepted_before + 1;
    Check(accepted == valid);
    if (valid) {
      Check(!done);
      res->landed[page.logical_page()] = page.data();
    } else if (!open) {
      Check(done && done->code() == StatusCode::kFailedPrecondition);  // a late write ends the stream
      s.over = true;
    } else {
      Check(!done);
      s.refused_page = true;
    }
    return;
  }
  if (!message.has_trailer()) {
    Check(!done);
    return;
  }
  Check(done.has_value());
  s.over = true;
  if (res == nullptr || !res->open) {
    Check(done->code() == StatusCode::kFailedPrecondition);
    return;
  }
  bool all_landed = true;
  for (const auto& page : res->landed) all_landed = all_landed && page.has_value();
  const int32_t first = message.trailer().first_token_id();
  const bool should_commit =
      all_landed && first >= 0 && first < kVocab && message.trailer().digest() == DigestOf(*res);
  Check(done->ok() == should_commit);
  // A refused commit aborts the transfer; either way it is over.
  res->open = false;
  res->committed = done->ok();
  if (!done->ok()) Check(s.session->failure().has_value());
}

}  // namespace

// Every refused page logs a warning: formatted (that code runs) but not written, or a 10^7 run
// writes gigabytes of them.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  tandem::SetLogSink([](tandem::LogLevel, const std::string&) {});
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  kv::PagePoolConfig pc;
  pc.shape = {1, 2, 0};  // BF16 rows of 4 bytes, what HashExecutor needs
  pc.page_tokens = kPageTokens;
  pc.budget_bytes = kPages * kPageTokens * 4;
  std::unique_ptr<kv::PagePool> pool = kv::PagePool::Create(pc).value();
  rt::HashExecutor executor(pool.get(), kVocab);
  rt::EngineConfig config;
  config.executor = &executor;
  config.role = rt::EngineRole::kDecodeOnly;
  config.integrity = true;
  config.import_timeout_ms = 600'000;
  std::unique_ptr<rt::Engine> engine = rt::Engine::Create(config).value();
  const uint64_t pages_free = engine->Stats().pages_free;
  tandem::agent::ImportTargetOf<rt::Engine> target(engine.get());

  std::vector<Reservation> reservations;
  const int wanted = in.ConsumeIntegralInRange<int>(1, 3);
  for (int i = 0; i < wanted; ++i) {
    rt::Request request;
    const size_t prompt = in.ConsumeIntegralInRange<size_t>(1, 7 * kPageTokens);
    for (size_t t = 0; t < prompt; ++t) request.prompt.push_back(static_cast<int32_t>((t * 7 + i) % kVocab));
    request.params.max_tokens = 3;
    request.params.temperature = 0;
    tandem::StatusOr<rt::ImportReservation> r = engine->ReserveImport(request);
    if (!r.ok()) {
      Check(r.status().code() == StatusCode::kResourceExhausted);
      continue;
    }
    Check(r->page_tags.size() == (prompt + kPageTokens - 1) / kPageTokens);
    Reservation res;
    res.r = *r;
    res.landed.resize(r->page_tags.size());
    reservations.push_back(std::move(res));
  }
  if (reservations.empty()) return 0;

  std::map<rt::RequestId, int> finishes;  // every output's finish, whichever step emitted it
  auto step = [&] {
    for (const rt::RequestOutput& out : engine->Step()) {
      if (out.finish) ++finishes[out.id];
    }
  };
  std::vector<Stream> streams(4);
  for (Stream& s : streams) s.session = std::make_unique<PushKvSession>(&target);
  for (int op = 0; op < 64 && in.remaining_bytes() > 0; ++op) {
    Stream& s = streams[in.ConsumeIntegralInRange<size_t>(0, streams.size() - 1)];
    const uint8_t kind = in.ConsumeIntegral<uint8_t>();
    if (kind < 16) {
      step();
      continue;
    }
    if (kind < 24) {
      if (s.over) continue;
      const bool named = s.transfer.has_value();
      const bool cancelled = in.ConsumeBool();
      const Status st = s.session->End(cancelled);
      Check(st.code() == StatusCode::kAborted);
      if (named) {
        if (Reservation* res = Find(reservations, *s.transfer); res != nullptr && res->open) {
          res->open = false;
          Check(s.session->failure().has_value());
        }
      }
      s.over = true;
      continue;
    }
    tandem::v1::PushKvMessage message;
    if (kind < 40) {  // raw bytes as a message, as a peer could put on the wire
      const std::string bytes = in.ConsumeRandomLengthString(256);
      if (!message.ParseFromString(bytes)) continue;
    } else {
      const Reservation& res = reservations[in.ConsumeIntegralInRange<size_t>(0, reservations.size() - 1)];
      uint64_t transfer = res.r.transfer_id;
      if (in.ConsumeIntegralInRange<int>(0, 15) == 0) transfer = in.ConsumeIntegral<uint64_t>();
      message.set_transfer_id(transfer);
      if (kind < 216) {
        const uint32_t pages = static_cast<uint32_t>(res.r.page_tags.size());
        uint32_t index = in.ConsumeIntegralInRange<uint32_t>(0, pages - 1);
        uint32_t tag = res.r.page_tags[index];
        size_t bytes = res.r.layout.page_bytes;
        switch (in.ConsumeIntegralInRange<int>(0, 11)) {
          case 0: index = pages + in.ConsumeIntegralInRange<uint32_t>(0, 3); break;
          case 1: index = in.ConsumeIntegral<uint32_t>(); break;
          case 2: tag ^= 1u << in.ConsumeIntegralInRange<int>(0, 31); break;
          case 3: tag = in.ConsumeIntegral<uint32_t>(); break;
          case 4: bytes = in.ConsumeIntegralInRange<size_t>(0, 2 * bytes + 1); break;
          default: break;
        }
        std::string payload = in.ConsumeBytesAsString(bytes);
        payload.resize(bytes, '\x5a');
        auto* page = message.mutable_page();
        page->set_logical_page(index);
        page->set_transfer_tag(tag);
        page->set_data(std::move(payload));
      } else {
        auto* trailer = message.mutable_trailer();
        trailer->set_num_pages(static_cast<uint32_t>(res.r.page_tags.size()));
        trailer->set_digest(in.ConsumeBool() ? DigestOf(res) : in.ConsumeIntegral<uint64_t>());
        trailer->set_first_token_id(in.ConsumeBool() ? in.ConsumeIntegralInRange<int32_t>(0, kVocab - 1)
                                                     : in.ConsumeIntegral<int32_t>());
      }
      if (in.ConsumeIntegralInRange<int>(0, 7) == 0) {  // corrupted on the wire
        std::string wire = message.SerializeAsString();
        if (!wire.empty()) {
          wire[in.ConsumeIntegralInRange<size_t>(0, wire.size() - 1)] ^= in.ConsumeIntegral<char>();
        }
        message.Clear();
        if (!message.ParseFromString(wire)) continue;
      }
    }
    Apply(reservations, s, message);
  }

  // Every stream closes; the committed requests run to their finish.
  for (Stream& s : streams) {
    if (s.over) continue;
    (void)s.session->End(false);
    if (s.transfer) {
      if (Reservation* res = Find(reservations, *s.transfer)) res->open = false;
    }
  }
  // Reservations no stream ever named time out in production; here they are aborted, as the
  // decode agent's Generate does when its router goes away.
  for (Reservation& res : reservations) {
    if (engine->AbortImport(res.r.transfer_id, "fuzz run over").ok()) Check(!res.committed);
  }
  for (int i = 0; i < 200; ++i) {
    step();
    const rt::EngineStats stats = engine->Stats();
    if (stats.pages_free == pages_free && stats.running == 0 && stats.waiting == 0) break;
  }
  const rt::EngineStats stats = engine->Stats();
  Check(stats.pages_free == pages_free);
  Check(stats.running == 0 && stats.waiting == 0);
  for (const Reservation& res : reservations) {
    if (res.committed) Check(finishes[res.r.id] == 1);
  }
  return 0;
}
