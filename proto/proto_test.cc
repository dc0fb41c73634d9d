#include <string>

#include <gtest/gtest.h>

#include "proto/tandem.grpc.pb.h"
#include "proto/tandem.pb.h"

namespace tandem::v1 {
namespace {

TEST(ProtoTest, PushKvMessageRoundTrips) {
  PushKvMessage msg;
  msg.set_transfer_id(41);
  KvPage* page = msg.mutable_page();
  page->set_logical_page(3);
  page->set_data(std::string(576, '\x7e'));
  page->set_transfer_tag(0xdeadbeef);

  std::string wire;
  ASSERT_TRUE(msg.SerializeToString(&wire));
  PushKvMessage back;
  ASSERT_TRUE(back.ParseFromString(wire));
  ASSERT_EQ(back.body_case(), PushKvMessage::kPage);
  EXPECT_EQ(back.page().logical_page(), 3u);
  EXPECT_EQ(back.page().data().size(), 576u);
  EXPECT_EQ(back.page().transfer_tag(), 0xdeadbeefu);
}

TEST(ProtoTest, GarbageBytesAreRejectedNotCrashed) {
  PushKvMessage msg;
  // A field header promising a length-delimited field far longer than the buffer.
  const std::string garbage("\x12\xff\xff\xff\x0f\x01\x02", 7);
  EXPECT_FALSE(msg.ParseFromString(garbage));
}

TEST(ProtoTest, ServicesAreGenerated) {
  EXPECT_STREQ(DecodeAgent::service_full_name(), "tandem.v1.DecodeAgent");
  const auto* file = PushKvMessage::descriptor()->file();
  const auto* decode = file->FindServiceByName("DecodeAgent");
  ASSERT_NE(decode, nullptr);
  EXPECT_TRUE(decode->FindMethodByName("PushKv")->client_streaming());
  EXPECT_TRUE(decode->FindMethodByName("Generate")->server_streaming());
  ASSERT_NE(file->FindServiceByName("PrefillAgent"), nullptr);
  EXPECT_NE(file->FindServiceByName("PrefillAgent")->FindMethodByName("Prefill"), nullptr);
  ASSERT_NE(file->FindServiceByName("AgentStatus"), nullptr);
}

}  // namespace
}  // namespace tandem::v1
