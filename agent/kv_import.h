#pragma once
// The decode side of one PushKv stream (proto/tandem.proto, DecodeAgent.PushKv), apart from gRPC
// so that it can be tested and fuzzed message by message: each PushKvMessage is checked and applied
// to an import (the engine's WritePage / CommitImport / AbortImport), in stream order.
//
// A stream carries one transfer: its first message names it, and a message naming another ends
// the stream and aborts the transfer. A page goes to WritePage, which refuses (before touching any
// memory) an unknown or ended transfer, a page index outside the reservation, a size other than
// the layout's, a tag other than the one issued for that page. A refused page does not end the
// stream (the commit will refuse the transfer, as a tag mismatch); a page for an ended transfer
// does (a late write). The trailer commits: every page landed with its tag and the digest of the
// landed bytes equals the sender's, or the transfer is refused. A stream that ends without a
// trailer aborts its transfer.

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "common/status.h"
#include "proto/tandem.pb.h"

namespace tandem::agent {

// Where the pages go: the decode engine's import calls (EngineLoop in the agent, Engine in tests).
class ImportTarget {
 public:
  virtual ~ImportTarget() = default;
  virtual Status WritePage(uint64_t transfer_id, uint32_t logical_page, std::span<const uint8_t> bytes,
                           uint32_t tag) = 0;
  virtual Status CommitImport(uint64_t transfer_id, int32_t first_token, uint64_t digest) = 0;
  virtual Status AbortImport(uint64_t transfer_id, std::string_view reason) = 0;
};

// ImportTarget over anything with the engine's import calls (runtime::EngineLoop, runtime::Engine).
template <typename Imports>
class ImportTargetOf final : public ImportTarget {
 public:
  explicit ImportTargetOf(Imports* imports) : imports_(imports) {}
  Status WritePage(uint64_t transfer_id, uint32_t logical_page, std::span<const uint8_t> bytes,
                   uint32_t tag) override {
    return imports_->WritePage(transfer_id, logical_page, bytes, tag);
  }
  Status CommitImport(uint64_t transfer_id, int32_t first_token, uint64_t digest) override {
    return imports_->CommitImport(transfer_id, first_token, digest);
  }
  Status AbortImport(uint64_t transfer_id, std::string_view reason) override {
    return imports_->AbortImport(transfer_id, reason);
  }

 private:
  Imports* imports_;
};

// Why a stream's transfer failed (the agent counts it as tandem_kv_transfer_failures_total{reason}).
enum class ImportFailure : uint8_t { kTagMismatch, kDigestMismatch, kAborted, kPeerGone };

class PushKvSession {
 public:
  // REQUIRES: target outlives the session.
  explicit PushKvSession(ImportTarget* target) : target_(target) {}

  // Applies one message. nullopt: read the next one. Otherwise the stream is over and this is its
  // answer (OK: committed).
  std::optional<Status> Apply(const v1::PushKvMessage& message);
  // The stream closed before its trailer: the transfer (if one was named) is aborted. `cancelled`:
  // the sender went away (its call was cancelled) rather than closing the stream early.
  Status End(bool cancelled);

  uint32_t pages_accepted() const { return accepted_; }
  bool has_transfer() const { return have_transfer_; }
  uint64_t transfer_id() const { return transfer_; }
  // Set once the stream is over with a refused or aborted transfer; nullopt after a commit, a
  // late write (the engine counts those) or a stream that named no transfer.
  std::optional<ImportFailure> failure() const { return failure_; }

 private:
  ImportTarget* target_;
  uint64_t transfer_ = 0;
  bool have_transfer_ = false;
  bool refused_page_ = false;
  uint32_t accepted_ = 0;
  std::optional<ImportFailure> failure_;
};

}  // namespace tandem::agent
