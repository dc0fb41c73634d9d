#include "common/status.h"

#include <memory>
#include <string>

#include <gtest/gtest.h>

namespace tandem {
namespace {

TEST(StatusTest, DefaultIsOk) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kOk);
  EXPECT_EQ(s.ToString(), "OK");
}

TEST(StatusTest, FactoriesCarryCodeAndMessage) {
  struct Case {
    Status status;
    StatusCode code;
    const char* name;
  };
  const Case cases[] = {
      {Status::InvalidArgument("x"), StatusCode::kInvalidArgument, "INVALID_ARGUMENT"},
      {Status::NotFound("x"), StatusCode::kNotFound, "NOT_FOUND"},
      {Status::DataLoss("x"), StatusCode::kDataLoss, "DATA_LOSS"},
      {Status::Unavailable("x"), StatusCode::kUnavailable, "UNAVAILABLE"},
      {Status::ResourceExhausted("x"), StatusCode::kResourceExhausted, "RESOURCE_EXHAUSTED"},
      {Status::DeadlineExceeded("x"), StatusCode::kDeadlineExceeded, "DEADLINE_EXCEEDED"},
      {Status::Aborted("x"), StatusCode::kAborted, "ABORTED"},
      {Status::Internal("x"), StatusCode::kInternal, "INTERNAL"},
      {Status::FailedPrecondition("x"), StatusCode::kFailedPrecondition, "FAILED_PRECONDITION"},
      {Status::Unimplemented("x"), StatusCode::kUnimplemented, "UNIMPLEMENTED"},
  };
  for (const Case& c : cases) {
    EXPECT_FALSE(c.status.ok());
    EXPECT_EQ(c.status.code(), c.code);
    EXPECT_EQ(c.status.message(), "x");
    EXPECT_EQ(c.status.ToString(), std::string(c.name) + ": x");
  }
}

TEST(StatusTest, CodesMatchGrpcNumbering) {
  EXPECT_EQ(static_cast<int>(StatusCode::kInvalidArgument), 3);
  EXPECT_EQ(static_cast<int>(StatusCode::kResourceExhausted), 8);
  EXPECT_EQ(static_cast<int>(StatusCode::kUnavailable), 14);
  EXPECT_EQ(static_cast<int>(StatusCode::kDataLoss), 15);
}

TEST(StatusTest, OkCodeDropsMessage) {
  Status s(StatusCode::kOk, "ignored");
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.message(), "");
}

TEST(StatusTest, WithContextPrefixesErrorsOnly) {
  Status e = Status::DataLoss("block checksum mismatch").WithContext("page 7");
  EXPECT_EQ(e.code(), StatusCode::kDataLoss);
  EXPECT_EQ(e.message(), "page 7: block checksum mismatch");
  EXPECT_TRUE(Status::Ok().WithContext("page 7").ok());
}

TEST(StatusOrTest, HoldsValue) {
  StatusOr<std::string> v = std::string("hello");
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(*v, "hello");
  EXPECT_EQ(v->size(), 5u);
  EXPECT_TRUE(v.status().ok());
}

TEST(StatusOrTest, HoldsError) {
  StatusOr<int> v = Status::NotFound("no such tensor");
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(v.value_or(7), 7);
}

TEST(StatusOrTest, OkStatusBecomesInternalError) {
  StatusOr<int> v = Status::Ok();
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.status().code(), StatusCode::kInternal);
}

TEST(StatusOrTest, MoveOnlyValues) {
  StatusOr<std::unique_ptr<int>> v = std::make_unique<int>(42);
  ASSERT_TRUE(v.ok());
  std::unique_ptr<int> p = std::move(v).value();
  EXPECT_EQ(*p, 42);
}

TEST(StatusOrDeathTest, ValueOnErrorAborts) {
  StatusOr<int> v = Status::Aborted("generation mismatch");
  EXPECT_DEATH((void)v.value(), "generation mismatch");
}

Status FailIf(bool fail) { return fail ? Status::Unavailable("down") : Status::Ok(); }
StatusOr<int> Half(int x) {
  if (x % 2 != 0) return Status::InvalidArgument("odd");
  return x / 2;
}

Status UsesReturnIfError(bool fail, int* steps) {
  RETURN_IF_ERROR(FailIf(fail));
  ++*steps;
  RETURN_IF_ERROR(Half(fail ? 3 : 4));  // a StatusOr works too
  ++*steps;
  return Status::Ok();
}

StatusOr<int> Quarter(int x) {
  ASSIGN_OR_RETURN(int half, Half(x));
  ASSIGN_OR_RETURN(int quarter, Half(half));
  return quarter;
}

TEST(StatusMacrosTest, ReturnIfErrorStopsAtFirstError) {
  int steps = 0;
  EXPECT_TRUE(UsesReturnIfError(false, &steps).ok());
  EXPECT_EQ(steps, 2);
  steps = 0;
  EXPECT_EQ(UsesReturnIfError(true, &steps).code(), StatusCode::kUnavailable);
  EXPECT_EQ(steps, 0);
}

TEST(StatusMacrosTest, AssignOrReturn) {
  EXPECT_EQ(*Quarter(8), 2);
  EXPECT_EQ(Quarter(6).status().message(), "odd");
  EXPECT_EQ(Quarter(5).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tandem
