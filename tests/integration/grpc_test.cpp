// gRPC end to end through floodgate, with a real gRPC server and client: Debian's
// python3-grpcio running the Echo service of grpc/echo.proto (compiled at test time by
// python3-grpc-tools; grpc/grpc_peer.py). Python's grpcio is the reference implementation's
// core with a thin binding, and needs nothing compiled into the suite (libgrpc++-dev would
// add a protoc step and minutes of compile to every CI build). The h2 upstream itself,
// against nghttpd and scripted origins, is h2_upstream_test.cpp.

#include <gtest/gtest.h>

#include <boost/json.hpp>

#include <string>

#include "floodgate_process.hpp"
#include "grpc_peer.hpp"
#include "h2_upstream_config.hpp"
#include "harness.hpp"
#include "redis_server.hpp"

namespace {

using namespace floodgate::testing;
using namespace std::chrono_literals;
namespace json = boost::json;

const std::string kEcho = "/floodgate.test.Echo/";

TEST(Grpc, CallsOfEveryKindPassWithTheirTrailers) {
  GrpcServer server;
  Proxy proxy(grpc_config(h2_upstream("grpc", server.port()),
                          "  - name: all\n    match: { path_prefix: / }\n    upstream: grpc\n"));
  auto unary = grpc_call(proxy.port(), "unary", 7);
  EXPECT_EQ(grpc_code(unary), "OK") << json::serialize(unary);
  EXPECT_EQ(grpc_trailing(unary, "x-tokens-used"), "7") << json::serialize(unary);

  auto streamed = grpc_call(proxy.port(), "server", 50);
  EXPECT_EQ(grpc_code(streamed), "OK") << json::serialize(streamed);
  ASSERT_TRUE(streamed.contains("replies"));
  EXPECT_EQ(streamed["replies"].as_array().size(), 50u);
  EXPECT_EQ(grpc_trailing(streamed, "x-tokens-used"), "50");

  auto client = grpc_call(proxy.port(), "client", 20);
  EXPECT_EQ(grpc_code(client), "OK") << json::serialize(client);
  ASSERT_EQ(client["replies"].as_array().size(), 1u);
  EXPECT_EQ(client["replies"].as_array()[0].as_object()["n"].as_int64(), 20);

  auto bidi = grpc_call(proxy.port(), "bidi", 30);
  EXPECT_EQ(grpc_code(bidi), "OK") << json::serialize(bidi);
  ASSERT_EQ(bidi["replies"].as_array().size(), 30u);
  EXPECT_EQ(bidi["replies"].as_array()[29].as_object()["text"].as_string(), "echo:b29");

  // Full duplex: each message waits for the echo of the one before (both directions of the
  // stream move at once through floodgate).
  auto pingpong = grpc_call(proxy.port(), "pingpong", 10);
  EXPECT_EQ(grpc_code(pingpong), "OK") << json::serialize(pingpong);
  ASSERT_EQ(pingpong["replies"].as_array().size(), 10u) << json::serialize(pingpong);
  EXPECT_EQ(pingpong["replies"].as_array()[9].as_object()["text"].as_string(), "echo:p9");

  auto count = grpc_call(proxy.port(), "count");
  EXPECT_EQ(count["replies"].as_array()[0].as_object()["n"].as_int64(), 5);
}

TEST(Grpc, ARefusedCallIsResourceExhaustedWithPushback) {
  GrpcServer server;
  Proxy proxy(
      grpc_config(h2_upstream("grpc", server.port()),
                  "  - name: unary\n    match: { path_prefix: " + kEcho +
                      "Unary }\n    upstream: grpc\n"
                      "    limits: [{ name: two, algorithm: fixed_window, limit: 2, "
                      "window: 1h, key: [ip] }]\n"
                      "  - name: all\n    match: { path_prefix: / }\n    upstream: grpc\n"));
  EXPECT_EQ(grpc_code(grpc_call(proxy.port(), "unary")), "OK");
  auto second = grpc_call(proxy.port(), "unary");
  EXPECT_EQ(grpc_code(second), "OK");
  auto third = grpc_call(proxy.port(), "unary");
  EXPECT_EQ(grpc_code(third), "RESOURCE_EXHAUSTED") << json::serialize(third);
  const auto pushback = grpc_trailing(third, "grpc-retry-pushback-ms");
  EXPECT_FALSE(pushback.empty()) << json::serialize(third);
  if (!pushback.empty()) {
    EXPECT_GT(std::stoll(pushback), 1000);
  }
  EXPECT_FALSE(grpc_trailing(third, "retry-after").empty());
  EXPECT_EQ(grpc_trailing(third, "x-ratelimit-limit"), "2");
  EXPECT_EQ(grpc_trailing(third, "x-ratelimit-remaining"), "0");
  EXPECT_NE(third["details"].as_string().find("two"), json::string::npos);
  // The refused call never reached the server.
  auto count = grpc_call(proxy.port(), "count");
  EXPECT_EQ(count["replies"].as_array()[0].as_object()["n"].as_int64(), 2);
}

TEST(Grpc, SettlementReadsTheTrueCostFromTheResponseTrailer) {
  GrpcServer server;
  // Each call is charged 1 unit up front; its trailer says it used 40 of the 100.
  Proxy proxy(grpc_config(h2_upstream("grpc", server.port()),
                          "  - name: tokens\n    match: { path_prefix: / }\n    upstream: grpc\n"
                          "    limits: [{ name: tokens, algorithm: token_bucket, capacity: 100, "
                          "refill_rate: 1/h, key: [route], settle: "
                          "\"response_trailer:x-tokens-used\" }]\n"));
  for (int i = 0; i < 3; ++i) {
    auto r = grpc_call(proxy.port(), "unary", 40);
    EXPECT_EQ(grpc_code(r), "OK") << "call " << i << ": " << json::serialize(r);
  }
  // 120 units used by now: without the trailer's settlement 97 would remain.
  auto r = grpc_call(proxy.port(), "unary", 40);
  EXPECT_EQ(grpc_code(r), "RESOURCE_EXHAUSTED") << json::serialize(r);
}

TEST(Grpc, KeysAndCostsReadTheCallsMetadata) {
  GrpcServer server;
  // Each tenant (x-tenant metadata) has 10 units; a call costs what its x-cost says.
  Proxy proxy(grpc_config(h2_upstream("grpc", server.port()),
                          "  - name: all\n    match: { path_prefix: / }\n    upstream: grpc\n"
                          "    limits: [{ name: units, algorithm: token_bucket, capacity: 10, "
                          "refill_rate: 1/h, key: [\"header:x-tenant\"], cost: { from: "
                          "\"header:x-cost\", default: 1 } }]\n"));
  EXPECT_EQ(grpc_code(grpc_call(proxy.port(), "unary", 1, "x-tenant=acme x-cost=6")), "OK");
  auto second = grpc_call(proxy.port(), "unary", 1, "x-tenant=acme x-cost=6");
  EXPECT_EQ(grpc_code(second), "RESOURCE_EXHAUSTED") << json::serialize(second);
  EXPECT_EQ(grpc_trailing(second, "x-ratelimit-remaining"), "0");
  // Another tenant has its own units; acme's last 4 still pass at cost 4.
  EXPECT_EQ(grpc_code(grpc_call(proxy.port(), "unary", 1, "x-tenant=globex x-cost=6")), "OK");
  EXPECT_EQ(grpc_code(grpc_call(proxy.port(), "unary", 1, "x-tenant=acme x-cost=4")), "OK");
  // No tenant: the key is missing, and on_missing_key's default (reject) is UNAUTHENTICATED.
  EXPECT_EQ(grpc_code(grpc_call(proxy.port(), "unary", 1, "x-cost=1")), "UNAUTHENTICATED");
}

TEST(Grpc, FloodgatesOwnAnswersAreGrpcStatuses) {
  GrpcServer server;
  const auto dead = free_port();  // nothing listens there
  Proxy proxy(grpc_config(
      h2_upstream("grpc", server.port(), ", response_timeout: 500ms") + h2_upstream("dead", dead),
      "  - name: needs-token\n    match: { path_prefix: " + kEcho +
          "Count }\n    upstream: grpc\n"
          "    limits: [{ name: t, algorithm: fixed_window, limit: 9, window: 1h, key: "
          "[jwt:sub] }]\n"
          "  - name: unreachable\n    match: { path_prefix: " +
          kEcho +
          "ServerStream }\n    upstream: dead\n"
          "  - name: slow\n    match: { path_prefix: " +
          kEcho + "Unary }\n    upstream: grpc\n",
      "jwt: { algorithms: [HS256], hs256_secret: \"0123456789abcdef0123456789abcdef\" }\n"));
  EXPECT_EQ(grpc_code(grpc_call(proxy.port(), "count")), "UNAUTHENTICATED");
  EXPECT_EQ(grpc_code(grpc_call(proxy.port(), "server")), "UNAVAILABLE");
  EXPECT_EQ(grpc_code(grpc_call(proxy.port(), "sleep", 2)), "DEADLINE_EXCEEDED");
  EXPECT_EQ(grpc_code(grpc_call(proxy.port(), "bidi")), "UNIMPLEMENTED");  // no route
}

TEST(Grpc, FailClosedIsUnavailable) {
  GrpcServer server;
  const auto dead_redis = free_port();
  Proxy proxy(grpc_config(
      h2_upstream("grpc", server.port()),
      "  - name: all\n    match: { path_prefix: / }\n    upstream: grpc\n"
      "    on_store_error: fail_closed\n"
      "    limits: [{ name: l, algorithm: token_bucket, capacity: 9, refill_rate: 1/s, key: "
      "[ip] }]\n",
      "store: { backend: redis, redis: { address: \"127.0.0.1:" + std::to_string(dead_redis) +
          "\", timeout: 100ms } }\n"));
  auto r = grpc_call(proxy.port(), "unary");
  EXPECT_EQ(grpc_code(r), "UNAVAILABLE") << json::serialize(r);
}

}  // namespace
