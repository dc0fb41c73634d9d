// PushKvSession against a recording import target: what each message does to the import, what
// the stream answers, and which failure the agent counts. (agent/fuzz/kv_transfer_fuzz.cc drives
// it against a real decode engine with arbitrary messages.)

#include "agent/kv_import.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace tandem::agent {
namespace {

// Accepts pages 0..pages-1 with tag 7 + index and 16 bytes; commits when every page landed and
// the digest is 42.
class FakeTarget final : public ImportTarget {
 public:
  Status WritePage(uint64_t transfer_id, uint32_t logical_page, std::span<const uint8_t> bytes,
                   uint32_t tag) override {
    if (transfer_id != 5 || !open) return Status::FailedPrecondition("not open");
    if (logical_page >= landed.size() || bytes.size() != 16 || tag != 7 + logical_page) {
      return Status::InvalidArgument("refused");
    }
    landed[logical_page] = true;
    return Status::Ok();
  }
  Status CommitImport(uint64_t transfer_id, int32_t, uint64_t digest) override {
    if (transfer_id != 5 || !open) return Status::FailedPrecondition("not open");
    open = false;
    for (bool l : landed) {
      if (!l) return Status::InvalidArgument("a page never arrived");
    }
    return digest == 42 ? Status::Ok() : Status::DataLoss("digest");
  }
  Status AbortImport(uint64_t transfer_id, std::string_view reason) override {
    aborts.emplace_back(reason);
    if (transfer_id != 5 || !open) return Status::FailedPrecondition("not open");
    open = false;
    return Status::Ok();
  }
  bool open = true;
  std::vector<bool> landed = std::vector<bool>(2, false);
  std::vector<std::string> aborts;
};

v1::PushKvMessage Page(uint64_t transfer, uint32_t index, uint32_t tag, size_t bytes = 16) {
  v1::PushKvMessage m;
  m.set_transfer_id(transfer);
  m.mutable_page()->set_logical_page(index);
  m.mutable_page()->set_transfer_tag(tag);
  m.mutable_page()->set_data(std::string(bytes, 'x'));
  return m;
}

v1::PushKvMessage Trailer(uint64_t transfer, uint64_t digest) {
  v1::PushKvMessage m;
  m.set_transfer_id(transfer);
  m.mutable_trailer()->set_num_pages(2);
  m.mutable_trailer()->set_digest(digest);
  return m;
}

TEST(PushKvSessionTest, PagesThenTrailerCommit) {
  FakeTarget target;
  PushKvSession s(&target);
  EXPECT_FALSE(s.Apply(Page(5, 0, 7)));
  EXPECT_FALSE(s.Apply(Page(5, 1, 8)));
  std::optional<Status> done = s.Apply(Trailer(5, 42));
  ASSERT_TRUE(done);
  EXPECT_TRUE(done->ok()) << done->ToString();
  EXPECT_EQ(s.pages_accepted(), 2u);
  EXPECT_FALSE(s.failure());
}

// A refused page (index, size or tag) does not end the stream; the commit then fails as a tag
// mismatch, unless the page was resent right.
TEST(PushKvSessionTest, ARefusedPageFailsTheCommitAsATagMismatch) {
  FakeTarget target;
  PushKvSession s(&target);
  EXPECT_FALSE(s.Apply(Page(5, 0, 7)));
  EXPECT_FALSE(s.Apply(Page(5, 1, 99)));     // wrong tag
  EXPECT_FALSE(s.Apply(Page(5, 9, 16)));     // outside the reservation
  EXPECT_FALSE(s.Apply(Page(5, 0, 7, 15)));  // short
  std::optional<Status> done = s.Apply(Trailer(5, 42));
  ASSERT_TRUE(done);
  EXPECT_EQ(done->code(), StatusCode::kDataLoss);
  EXPECT_EQ(s.failure(), ImportFailure::kTagMismatch);
  EXPECT_EQ(s.pages_accepted(), 1u);

  FakeTarget resent;
  PushKvSession r(&resent);
  EXPECT_FALSE(r.Apply(Page(5, 0, 7)));
  EXPECT_FALSE(r.Apply(Page(5, 1, 99)));
  EXPECT_FALSE(r.Apply(Page(5, 1, 8)));
  EXPECT_TRUE(r.Apply(Trailer(5, 42))->ok());
}

TEST(PushKvSessionTest, AWrongDigestIsADigestMismatch) {
  FakeTarget target;
  PushKvSession s(&target);
  EXPECT_FALSE(s.Apply(Page(5, 0, 7)));
  EXPECT_FALSE(s.Apply(Page(5, 1, 8)));
  EXPECT_EQ(s.Apply(Trailer(5, 41))->code(), StatusCode::kDataLoss);
  EXPECT_EQ(s.failure(), ImportFailure::kDigestMismatch);
}

TEST(PushKvSessionTest, SwitchingTransfersAbortsTheFirst) {
  FakeTarget target;
  PushKvSession s(&target);
  EXPECT_FALSE(s.Apply(Page(5, 0, 7)));
  std::optional<Status> done = s.Apply(Page(6, 0, 7));
  ASSERT_TRUE(done);
  EXPECT_EQ(done->code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(target.open);
  EXPECT_EQ(s.failure(), ImportFailure::kAborted);
}

// A page for a transfer that is not open (ended, or never issued) ends the stream: a late write.
TEST(PushKvSessionTest, ALateWriteEndsTheStreamWithoutAFailureToCount) {
  FakeTarget target;
  target.open = false;
  PushKvSession s(&target);
  std::optional<Status> done = s.Apply(Page(5, 0, 7));
  ASSERT_TRUE(done);
  EXPECT_EQ(done->code(), StatusCode::kFailedPrecondition);
  EXPECT_FALSE(s.failure());
}

// A trailer for a transfer that ended elsewhere is FailedPrecondition even after refused pages:
// the refusals are not why it failed.
TEST(PushKvSessionTest, ATrailerAfterTheTransferEndedIsNotATagMismatch) {
  FakeTarget target;
  PushKvSession s(&target);
  EXPECT_FALSE(s.Apply(Page(5, 1, 99)));
  target.open = false;
  std::optional<Status> done = s.Apply(Trailer(5, 42));
  ASSERT_TRUE(done);
  EXPECT_EQ(done->code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.failure(), ImportFailure::kAborted);
}

TEST(PushKvSessionTest, AStreamEndingWithoutItsTrailerAbortsTheTransfer) {
  FakeTarget target;
  PushKvSession s(&target);
  EXPECT_FALSE(s.Apply(Page(5, 0, 7)));
  EXPECT_EQ(s.End(/*cancelled=*/true).code(), StatusCode::kAborted);
  EXPECT_FALSE(target.open);
  ASSERT_EQ(target.aborts.size(), 1u);
  EXPECT_EQ(target.aborts[0], "the prefill agent cancelled the transfer");
  EXPECT_EQ(s.failure(), ImportFailure::kPeerGone);

  FakeTarget idle;
  PushKvSession empty(&idle);
  EXPECT_EQ(empty.End(false).code(), StatusCode::kAborted);
  EXPECT_TRUE(idle.aborts.empty());  // no transfer was named: nothing to abort
  EXPECT_FALSE(empty.failure());
}

}  // namespace
}  // namespace tandem::agent
