// gRPC end to end through floodgate, with a real gRPC server and client: Debian's
// python3-grpcio running the Echo service of grpc/echo.proto (compiled at test time by
// python3-grpc-tools; grpc/grpc_peer.py). Python's grpcio is the reference implementation's
// core with a thin binding, and needs nothing compiled into the suite (libgrpc++-dev would
// add a protoc step and minutes of compile to every CI build). nghttpd (nghttp2-server)
// is a second h2 origin, over h2c and over TLS with ALPN.

#include <gtest/gtest.h>

#include <boost/json.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "floodgate_process.hpp"
#include "harness.hpp"
#include "redis_server.hpp"
#include "test_pki.hpp"

namespace {

using namespace floodgate::testing;
using namespace std::chrono_literals;
namespace json = boost::json;

const std::string kPeer = "/usr/bin/python3 " FLOODGATE_SOURCE_DIR "/tests/integration/grpc/grpc_peer.py";

// The Echo service on a free port of its own choosing.
class GrpcServer {
 public:
  GrpcServer()
      : process_({"/usr/bin/python3", FLOODGATE_SOURCE_DIR "/tests/integration/grpc/grpc_peer.py",
                  "server"}) {
    auto line = process_.read_line(20s);
    port_ = line.empty() ? 0 : static_cast<std::uint16_t>(std::stoi(line));
    if (port_ == 0) ADD_FAILURE() << "the gRPC server did not start";
  }
  std::uint16_t port() const { return port_; }

 private:
  ChildProcess process_;
  std::uint16_t port_ = 0;
};

// One call of `kind` through floodgate on `port` (grpc_peer.py call): the status code's name,
// the details, the replies and both metadata maps, as JSON.
json::object call(std::uint16_t port, const std::string& kind, int n = 3,
                  const std::string& metadata = "") {
  auto out = command_output(kPeer + " call " + std::to_string(port) + " " + kind + " " +
                                std::to_string(n) + " " + metadata,
                            40);
  boost::system::error_code ec;
  auto v = json::parse(out, ec);
  if (ec || !v.is_object()) {
    ADD_FAILURE() << "grpc_peer.py printed: " << out;
    return {};
  }
  return v.as_object();
}

std::string code_of(const json::object& r) {
  auto* c = r.if_contains("code");
  return c && c->is_string() ? std::string(c->as_string()) : "none";
}

std::string trailing(const json::object& r, const std::string& name) {
  auto* t = r.if_contains("trailing");
  if (!t || !t->is_object()) return "";
  auto* v = t->as_object().if_contains(name);
  return v && v->is_string() ? std::string(v->as_string()) : "";
}

// floodgate on h2c and HTTP/1.1 in front of `upstreams`, with `routes` (YAML list items).
std::string grpc_config(const std::string& upstreams, const std::string& routes,
                        const std::string& extra = "") {
  return "server:\n  threads: 1\n  listen:\n    - { address: \"127.0.0.1:0\", protocols: [http1, "
         "h2c] }\n" +
         extra + "upstreams:\n" + upstreams + "routes:\n" + routes;
}

std::string h2_upstream(const std::string& name, std::uint16_t port,
                        const std::string& more = "") {
  return "  " + name + ": { url: \"http://127.0.0.1:" + std::to_string(port) +
         "\", protocol: h2" + more + " }\n";
}

const std::string kEcho = "/floodgate.test.Echo/";

TEST(Grpc, CallsOfEveryKindPassWithTheirTrailers) {
  GrpcServer server;
  Proxy proxy(grpc_config(h2_upstream("grpc", server.port()),
                          "  - name: all\n    match: { path_prefix: / }\n    upstream: grpc\n"));
  auto unary = call(proxy.port(), "unary", 7);
  EXPECT_EQ(code_of(unary), "OK") << json::serialize(unary);
  EXPECT_EQ(trailing(unary, "x-tokens-used"), "7") << json::serialize(unary);

  auto streamed = call(proxy.port(), "server", 50);
  EXPECT_EQ(code_of(streamed), "OK") << json::serialize(streamed);
  ASSERT_TRUE(streamed.contains("replies"));
  EXPECT_EQ(streamed["replies"].as_array().size(), 50u);
  EXPECT_EQ(trailing(streamed, "x-tokens-used"), "50");

  auto client = call(proxy.port(), "client", 20);
  EXPECT_EQ(code_of(client), "OK") << json::serialize(client);
  ASSERT_EQ(client["replies"].as_array().size(), 1u);
  EXPECT_EQ(client["replies"].as_array()[0].as_object()["n"].as_int64(), 20);

  auto bidi = call(proxy.port(), "bidi", 30);
  EXPECT_EQ(code_of(bidi), "OK") << json::serialize(bidi);
  ASSERT_EQ(bidi["replies"].as_array().size(), 30u);
  EXPECT_EQ(bidi["replies"].as_array()[29].as_object()["text"].as_string(), "echo:b29");

  auto count = call(proxy.port(), "count");
  EXPECT_EQ(count["replies"].as_array()[0].as_object()["n"].as_int64(), 4);
}

TEST(Grpc, ARefusedCallIsResourceExhaustedWithPushback) {
  GrpcServer server;
  Proxy proxy(grpc_config(h2_upstream("grpc", server.port()),
                          "  - name: unary\n    match: { path_prefix: " + kEcho +
                              "Unary }\n    upstream: grpc\n"
                              "    limits: [{ name: two, algorithm: fixed_window, limit: 2, "
                              "window: 1h, key: [ip] }]\n"
                              "  - name: all\n    match: { path_prefix: / }\n    upstream: grpc\n"));
  EXPECT_EQ(code_of(call(proxy.port(), "unary")), "OK");
  auto second = call(proxy.port(), "unary");
  EXPECT_EQ(code_of(second), "OK");
  auto third = call(proxy.port(), "unary");
  EXPECT_EQ(code_of(third), "RESOURCE_EXHAUSTED") << json::serialize(third);
  const auto pushback = trailing(third, "grpc-retry-pushback-ms");
  EXPECT_FALSE(pushback.empty()) << json::serialize(third);
  if (!pushback.empty()) {
    EXPECT_GT(std::stoll(pushback), 1000);
  }
  EXPECT_FALSE(trailing(third, "retry-after").empty());
  EXPECT_EQ(trailing(third, "x-ratelimit-limit"), "2");
  EXPECT_EQ(trailing(third, "x-ratelimit-remaining"), "0");
  EXPECT_NE(third["details"].as_string().find("two"), json::string::npos);
  // The refused call never reached the server.
  auto count = call(proxy.port(), "count");
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
    auto r = call(proxy.port(), "unary", 40);
    EXPECT_EQ(code_of(r), "OK") << "call " << i << ": " << json::serialize(r);
  }
  // 120 units used by now: without the trailer's settlement 97 would remain.
  auto r = call(proxy.port(), "unary", 40);
  EXPECT_EQ(code_of(r), "RESOURCE_EXHAUSTED") << json::serialize(r);
}

TEST(Grpc, KeysAndCostsReadTheCallsMetadata) {
  GrpcServer server;
  // Each tenant (x-tenant metadata) has 10 units; a call costs what its x-cost says.
  Proxy proxy(grpc_config(h2_upstream("grpc", server.port()),
                          "  - name: all\n    match: { path_prefix: / }\n    upstream: grpc\n"
                          "    limits: [{ name: units, algorithm: token_bucket, capacity: 10, "
                          "refill_rate: 1/h, key: [\"header:x-tenant\"], cost: { from: "
                          "\"header:x-cost\", default: 1 } }]\n"));
  EXPECT_EQ(code_of(call(proxy.port(), "unary", 1, "x-tenant=acme x-cost=6")), "OK");
  auto second = call(proxy.port(), "unary", 1, "x-tenant=acme x-cost=6");
  EXPECT_EQ(code_of(second), "RESOURCE_EXHAUSTED") << json::serialize(second);
  EXPECT_EQ(trailing(second, "x-ratelimit-remaining"), "0");
  // Another tenant has its own units; acme's last 4 still pass at cost 4.
  EXPECT_EQ(code_of(call(proxy.port(), "unary", 1, "x-tenant=globex x-cost=6")), "OK");
  EXPECT_EQ(code_of(call(proxy.port(), "unary", 1, "x-tenant=acme x-cost=4")), "OK");
  // No tenant: the key is missing, and on_missing_key's default (reject) is UNAUTHENTICATED.
  EXPECT_EQ(code_of(call(proxy.port(), "unary", 1, "x-cost=1")), "UNAUTHENTICATED");
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
          "  - name: unreachable\n    match: { path_prefix: " + kEcho +
          "ServerStream }\n    upstream: dead\n"
          "  - name: slow\n    match: { path_prefix: " + kEcho + "Unary }\n    upstream: grpc\n",
      "jwt: { algorithms: [HS256], hs256_secret: \"0123456789abcdef0123456789abcdef\" }\n"));
  EXPECT_EQ(code_of(call(proxy.port(), "count")), "UNAUTHENTICATED");
  EXPECT_EQ(code_of(call(proxy.port(), "server")), "UNAVAILABLE");
  EXPECT_EQ(code_of(call(proxy.port(), "sleep", 2)), "DEADLINE_EXCEEDED");
  EXPECT_EQ(code_of(call(proxy.port(), "bidi")), "UNIMPLEMENTED");  // no route
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
  auto r = call(proxy.port(), "unary");
  EXPECT_EQ(code_of(r), "UNAVAILABLE") << json::serialize(r);
}

// nghttpd serving a directory over h2c, or over TLS where ALPN must agree on h2.
class Nghttpd {
 public:
  explicit Nghttpd(const std::string& dir, const std::string& cert = "",
                   const std::string& key = "", int max_streams = 100)
      : port_(free_port()),
        process_(cert.empty()
                     ? std::vector<std::string>{"/usr/sbin/nghttpd", "--no-tls", "-d", dir,
                                                "-m", std::to_string(max_streams),
                                                std::to_string(port_)}
                     : std::vector<std::string>{"/usr/sbin/nghttpd", "-d", dir, "-m",
                                                std::to_string(max_streams),
                                                std::to_string(port_), key, cert}) {
    wait_listening(port_);
  }
  std::uint16_t port() const { return port_; }

 private:
  std::uint16_t port_;
  ChildProcess process_;
};

std::string served_dir() {
  auto dir = std::filesystem::temp_directory_path() /
             ("fg-nghttpd-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "hello.txt") << "hello from nghttpd\n";
  std::ofstream(dir / "big.bin") << std::string(1'000'000, 'b');
  return dir.string();
}

TEST(Grpc, NghttpdIsAnH2OriginForHttp2AndHttp11Clients) {
  if (!std::filesystem::exists("/usr/sbin/nghttpd")) GTEST_SKIP() << "nghttp2-server not installed";
  Nghttpd origin(served_dir());
  Proxy proxy(grpc_config(h2_upstream("h2", origin.port()),
                          "  - name: all\n    match: { path_prefix: / }\n    upstream: h2\n"
                          "    limits: [{ name: l, algorithm: fixed_window, limit: 1000, window: "
                          "1h, key: [ip] }]\n"));
  const auto base = "http://127.0.0.1:" + std::to_string(proxy.port());
  EXPECT_EQ(command_output("curl -s --http2-prior-knowledge " + base + "/hello.txt", 20),
            "hello from nghttpd");
  EXPECT_EQ(command_output("curl -s --http1.1 " + base + "/hello.txt", 20), "hello from nghttpd");
  EXPECT_EQ(command_output("curl -s --http1.1 -o /dev/null -w '%{http_code} %{size_download}' " +
                               base + "/big.bin",
                           20),
            "200 1000000");
  EXPECT_EQ(command_output("curl -s --http2-prior-knowledge -o /dev/null -w '%{http_code} "
                           "%{size_download}' " +
                               base + "/big.bin",
                           20),
            "200 1000000");
  // A body far past every window (64 KiB a stream) goes up as the origin takes it: the
  // client's window reopens only as floodgate hands its DATA on.
  auto upload = write_temp_file("h2-upstream-upload", std::string(3'000'000, 'u'));
  EXPECT_EQ(command_output("curl -s --http2-prior-knowledge --data-binary @" + upload + " " + base +
                               "/hello.txt",
                           30),
            "hello from nghttpd");
  EXPECT_EQ(command_output("curl -s --http1.1 -H 'Transfer-Encoding: chunked' --data-binary @" +
                               upload + " " + base + "/hello.txt",
                           30),
            "hello from nghttpd");
  // The rate headers are added to the origin's response, as for an HTTP/1.1 upstream.
  EXPECT_NE(command_output("curl -s -D - -o /dev/null --http2-prior-knowledge " + base +
                               "/hello.txt",
                           20)
                .find("x-ratelimit-limit: 1000"),
            std::string::npos);
  // Many streams at once over one client connection share the upstream's connection.
  auto h2load = command_output("h2load -n 200 -c 2 -m 20 " + base + "/hello.txt", 60);
  EXPECT_NE(h2load.find("200 succeeded"), std::string::npos) << h2load;
}

TEST(Grpc, AnOriginsStreamLimitIsKeptWithMoreConnections) {
  if (!std::filesystem::exists("/usr/sbin/nghttpd")) GTEST_SKIP() << "nghttp2-server not installed";
  // The origin takes 2 streams per connection; 40 arrive at once over 2 client connections.
  Nghttpd origin(served_dir(), "", "", 2);
  Proxy proxy(grpc_config(h2_upstream("h2", origin.port()),
                          "  - name: all\n    match: { path_prefix: / }\n    upstream: h2\n"));
  auto out = command_output("h2load -n 400 -c 2 -m 20 http://127.0.0.1:" +
                                std::to_string(proxy.port()) + "/hello.txt",
                            60);
  EXPECT_NE(out.find("400 succeeded"), std::string::npos) << out;
  EXPECT_NE(out.find("status codes: 400 2xx"), std::string::npos) << out;
}

TEST(Grpc, AnHttpsH2UpstreamIsVerifiedAndAgreesOnH2ByAlpn) {
  if (!std::filesystem::exists("/usr/sbin/nghttpd")) GTEST_SKIP() << "nghttp2-server not installed";
  TestPki pki;
  auto leaf = pki.issue("localhost", {"localhost"});
  Nghttpd origin(served_dir(), leaf.cert, leaf.key);
  Proxy proxy(grpc_config("  h2: { url: \"https://localhost:" + std::to_string(origin.port()) +
                              "\", protocol: h2, ca_file: \"" + pki.ca_file() + "\" }\n",
                          "  - name: all\n    match: { path_prefix: / }\n    upstream: h2\n"));
  EXPECT_EQ(command_output("curl -s --http2-prior-knowledge http://127.0.0.1:" +
                               std::to_string(proxy.port()) + "/hello.txt",
                           20),
            "hello from nghttpd");
}

// grpc/h2_origin.py in one of its modes, on a port of its own choosing.
class ScriptedOrigin {
 public:
  explicit ScriptedOrigin(const std::string& mode)
      : process_({"/usr/bin/python3", FLOODGATE_SOURCE_DIR "/tests/integration/grpc/h2_origin.py",
                  mode}) {
    auto line = process_.read_line(10s);
    port_ = line.empty() ? 0 : static_cast<std::uint16_t>(std::stoi(line));
    if (port_ == 0) ADD_FAILURE() << "h2_origin.py " << mode << " did not start";
  }
  std::uint16_t port() const { return port_; }

 private:
  ChildProcess process_;
  std::uint16_t port_ = 0;
};

// A broken or hostile h2 origin: the client gets 502 when nothing of a response reached it,
// never a response that looks complete when it is not, and floodgate keeps serving.
TEST(Grpc, ABrokenOriginIsA502OrACutResponseNeverAWholeOne) {
  struct Case {
    std::string mode;
    bool before_head;  // nothing of a response can reach the client: a 502
  };
  const Case cases[] = {{"reset-before-head", true}, {"close-before-head", true},
                        {"huge-head", true},         {"no-status", true},
                        {"reset-mid-body", false},   {"close-mid-body", false}};
  for (const auto& c : cases) {
    ScriptedOrigin origin(c.mode);
    Proxy proxy(grpc_config(h2_upstream("o", origin.port()),
                            "  - name: all\n    match: { path_prefix: / }\n    upstream: o\n"));
    const auto target = "http://127.0.0.1:" + std::to_string(proxy.port()) + "/x";
    for (const std::string how : {"--http2-prior-knowledge", "--http1.1"}) {
      // "STATUS BYTES CURL-EXIT"
      auto out = command_output("curl -s " + how + " -o /dev/null -w '%{http_code} %{size_download}' " +
                                    target + "; echo \" $?\"",
                                20);
      if (c.before_head) {
        EXPECT_EQ(out.substr(0, 3), "502") << c.mode << " " << how << ": " << out;
      } else {
        // The origin promised 100000 bytes and sent 1000: a client must not take it as whole.
        std::istringstream words(out);
        std::string status, bytes, exit_code;
        words >> status >> bytes >> exit_code;
        const bool cut = status == "502" || exit_code != "0";
        EXPECT_TRUE(cut) << c.mode << " " << how << ": " << out;
        EXPECT_EQ(out.find("100000"), std::string::npos) << c.mode << " " << how << ": " << out;
      }
    }
    // The worker is still serving.
    EXPECT_EQ(command_output("curl -s --http1.1 -o /dev/null -w '%{http_code}' " + target, 20),
              c.before_head ? "502" : "200")
        << c.mode;
  }
}

TEST(Grpc, AnOriginThatDoesNotSpeakHttp2IsA502) {
  Origin origin;  // HTTP/1.1 only: it answers the HTTP/2 preface with an HTTP/1.1 error
  Proxy proxy(grpc_config(h2_upstream("wrong", origin.port()),
                          "  - name: all\n    match: { path_prefix: / }\n    upstream: wrong\n"));
  const auto target = "http://127.0.0.1:" + std::to_string(proxy.port()) + "/x";
  EXPECT_EQ(command_output("curl -s --http2-prior-knowledge -o /dev/null -w '%{http_code}' " +
                               target,
                           20),
            "502");
  EXPECT_EQ(command_output("curl -s --http1.1 -o /dev/null -w '%{http_code}' " + target, 20),
            "502");
}

TEST(Grpc, StreamsAGoawayRefusedGoAgainOnANewConnectionAndNoneRunsTwice) {
  // Each of its connections processes at most one stream, then says GOAWAY (its first
  // processes none): grpc/h2_origin.py.
  ScriptedOrigin origin("goaway");
  const auto port = origin.port();
  Proxy proxy(grpc_config(h2_upstream("goaway", port),
                          "  - name: all\n    match: { path_prefix: / }\n    upstream: goaway\n"));
  const auto base = "http://127.0.0.1:" + std::to_string(proxy.port());
  // Refused unprocessed on the first connection, served on the second.
  EXPECT_EQ(command_output("curl -s --http2-prior-knowledge " + base + "/a", 20), "served 1");
  // A connection that said GOAWAY takes no new stream.
  EXPECT_EQ(command_output("curl -s --http1.1 " + base + "/b", 20), "served 2");
  EXPECT_EQ(command_output("curl -s --http2-prior-knowledge " + base + "/c", 20), "served 3");
  // Two streams at once on one upstream connection: one is processed, the other refused
  // by the GOAWAY and sent again on a new connection.
  auto both = command_output("h2load -n 2 -c 1 -m 2 " + base + "/d", 20);
  EXPECT_NE(both.find("2 succeeded"), std::string::npos) << both;
  // Nothing was processed twice, nothing lost.
  EXPECT_EQ(command_output("curl -s --http2-prior-knowledge " + base + "/count", 20), "served 5");
}

}  // namespace
