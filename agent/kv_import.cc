#include "agent/kv_import.h"

#include <string>

#include "common/logging.h"

namespace tandem::agent {

std::optional<Status> PushKvSession::Apply(const v1::PushKvMessage& message) {
  if (!have_transfer_) {
    transfer_ = message.transfer_id();
    have_transfer_ = true;
  } else if (message.transfer_id() != transfer_) {
    (void)target_->AbortImport(transfer_, "a push stream switched transfers");
    failure_ = ImportFailure::kAborted;
    return Status::InvalidArgument("one PushKv stream carries one transfer");
  }
  if (message.has_page()) {
    const std::string& data = message.page().data();
    Status st = target_->WritePage(
        transfer_, message.page().logical_page(),
        std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(data.data()), data.size()),
        message.page().transfer_tag());
    if (st.ok()) {
      ++accepted_;
      return std::nullopt;
    }
    // The transfer has ended or was never open (a late write): refused and counted by the engine.
    if (st.code() == StatusCode::kFailedPrecondition) return st;
    refused_page_ = true;  // a wrong tag, index or size: the commit will refuse the transfer
    TANDEM_LOG(Warning) << "transfer " << transfer_ << ": page " << message.page().logical_page()
                        << " refused: " << st.ToString();
    return std::nullopt;
  }
  if (!message.has_trailer()) return std::nullopt;  // nothing to apply
  Status st =
      target_->CommitImport(transfer_, message.trailer().first_token_id(), message.trailer().digest());
  if (st.ok()) return st;
  // FailedPrecondition: the transfer was no longer open (ended by its deadline, another stream or
  // a cancel) and the stream's refused pages are not why.
  const bool ended = st.code() == StatusCode::kFailedPrecondition;
  if (refused_page_ && !ended) {
    // A page refused for its tag never landed: the commit says "missing", the cause is the tag.
    st = Status::DataLoss("transfer " + std::to_string(transfer_) +
                          ": a page carried a transfer tag not issued for it (" + st.message() + ")");
  }
  failure_ = refused_page_ && !ended              ? ImportFailure::kTagMismatch
             : st.code() == StatusCode::kDataLoss ? ImportFailure::kDigestMismatch
                                                  : ImportFailure::kAborted;
  TANDEM_LOG(Warning) << "transfer " << transfer_ << " refused at commit: " << st.ToString();
  return st;
}

Status PushKvSession::End(bool cancelled) {
  if (have_transfer_) {
    const std::string why =
        cancelled ? "the prefill agent cancelled the transfer" : "the push stream ended before its trailer";
    if (target_->AbortImport(transfer_, why).ok()) {
      failure_ = cancelled ? ImportFailure::kPeerGone : ImportFailure::kAborted;
    }
  }
  return Status::Aborted("the push stream ended before its trailer");
}

}  // namespace tandem::agent
