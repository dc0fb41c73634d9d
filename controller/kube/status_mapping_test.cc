#include <gtest/gtest.h>

#include "controller/kube/client.h"

namespace tandem::controller::kube {
namespace {

TEST(StatusFromHttp, MapsCodesByConvention) {
  struct Case {
    int http;
    bool is_create;
    StatusCode want;
  };
  const Case cases[] = {
      {400, false, StatusCode::kInvalidArgument}, {422, false, StatusCode::kInvalidArgument},
      {401, false, StatusCode::kUnauthenticated}, {403, false, StatusCode::kPermissionDenied},
      {404, false, StatusCode::kNotFound},        {409, true, StatusCode::kAlreadyExists},
      {409, false, StatusCode::kAborted},         {410, false, StatusCode::kOutOfRange},
      {429, false, StatusCode::kUnavailable},     {500, false, StatusCode::kUnavailable},
      {503, false, StatusCode::kUnavailable},     {504, false, StatusCode::kUnavailable},
      {418, false, StatusCode::kUnknown},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(StatusFromHttp(c.http, "", "GET /x", c.is_create).code(), c.want) << c.http;
  }
}

TEST(StatusFromHttp, CarriesTheKubernetesStatusMessage) {
  const std::string body =
      R"({"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Conflict","code":409,)"
      R"("message":"Operation cannot be fulfilled on configmaps \"a\": the object has been modified"})";
  Status s = StatusFromHttp(409, body, "PUT /api/v1/namespaces/d/configmaps/a");
  EXPECT_EQ(s.code(), StatusCode::kAborted);
  EXPECT_EQ(
      s.message(),
      "PUT /api/v1/namespaces/d/configmaps/a: 409 Conflict: Operation cannot be fulfilled on configmaps "
      "\"a\": the object has been modified");
}

TEST(StatusFromHttp, NonJsonBodiesAreTruncated) {
  Status s = StatusFromHttp(502, std::string(1000, 'x'), "GET /y");
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_LT(s.message().size(), 300u);
  EXPECT_NE(s.message().find("GET /y: 502: xxx"), std::string::npos);
}

}  // namespace
}  // namespace tandem::controller::kube
