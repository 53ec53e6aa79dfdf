// The h2 upstream (`upstreams.NAME.protocol: h2`) against real and scripted origins: nghttpd
// (nghttp2-server) over h2c and over TLS with ALPN, for HTTP/2 and HTTP/1.1 clients, with big
// bodies both ways and a small stream limit; grpc/h2_origin.py (python3-h2) for GOAWAY and
// for an origin that breaks or misbehaves in each way it can.

#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "cannot_run.hpp"
#include "floodgate_process.hpp"
#include "h2_upstream_config.hpp"
#include "harness.hpp"
#include "redis_server.hpp"
#include "test_pki.hpp"

namespace {

using namespace floodgate::testing;
using namespace std::chrono_literals;

// nghttpd serving a directory over h2c, or over TLS where ALPN must agree on h2.
class Nghttpd {
 public:
  explicit Nghttpd(const std::string& dir, const std::string& cert = "",
                   const std::string& key = "", int max_streams = 100)
      : port_(free_port()),
        process_(cert.empty()
                     ? std::vector<std::string>{find_tool("nghttpd"), "--no-tls", "-d", dir, "-m",
                                                std::to_string(max_streams), std::to_string(port_)}
                     : std::vector<std::string>{find_tool("nghttpd"), "-d", dir, "-m",
                                                std::to_string(max_streams), std::to_string(port_),
                                                key, cert}) {
    wait_listening(port_);
  }
  std::uint16_t port() const { return port_; }

 private:
  std::uint16_t port_;
  ChildProcess process_;
};

std::string served_dir() {
  auto dir = std::filesystem::temp_directory_path() / ("fg-nghttpd-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "hello.txt") << "hello from nghttpd\n";
  std::ofstream(dir / "big.bin") << std::string(1'000'000, 'b');
  return dir.string();
}

TEST(H2Upstream, NghttpdIsAnH2OriginForHttp2AndHttp11Clients) {
  FLOODGATE_REQUIRE_TOOL("nghttpd", "nghttp2-server");
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
  EXPECT_NE(
      command_output("curl -s -D - -o /dev/null --http2-prior-knowledge " + base + "/hello.txt", 20)
          .find("x-ratelimit-limit: 1000"),
      std::string::npos);
  // Many streams at once over one client connection share the upstream's connection.
  auto h2load = command_output("h2load -n 200 -c 2 -m 20 " + base + "/hello.txt", 60);
  EXPECT_NE(h2load.find("200 succeeded"), std::string::npos) << h2load;
}

TEST(H2Upstream, AnOriginsStreamLimitIsKeptWithMoreConnections) {
  FLOODGATE_REQUIRE_TOOL("nghttpd", "nghttp2-server");
  // The origin takes 2 streams per connection; 40 arrive at once over 2 client connections.
  Nghttpd origin(served_dir(), "", "", 2);
  Proxy proxy(grpc_config(h2_upstream("h2", origin.port()),
                          "  - name: all\n    match: { path_prefix: / }\n    upstream: h2\n"));
  auto out = command_output(
      "h2load -n 400 -c 2 -m 20 http://127.0.0.1:" + std::to_string(proxy.port()) + "/hello.txt",
      60);
  EXPECT_NE(out.find("400 succeeded"), std::string::npos) << out;
  EXPECT_NE(out.find("status codes: 400 2xx"), std::string::npos) << out;
  // Kept, not recovered: no stream was refused by the origin and sent again (floodgate sends
  // a connection no more streams than its SETTINGS allow, and opens more connections).
  EXPECT_EQ(proxy.metrics().upstream("h2").resent.load(), 0u);
  EXPECT_EQ(proxy.metrics().upstream("h2").retries.load(), 0u);
}

TEST(H2Upstream, AnHttpsH2UpstreamIsVerifiedAndAgreesOnH2ByAlpn) {
  FLOODGATE_REQUIRE_TOOL("nghttpd", "nghttp2-server");
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
TEST(H2Upstream, ABrokenOriginIsA502OrACutResponseNeverAWholeOne) {
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
      auto out =
          command_output("curl -s " + how + " -o /dev/null -w '%{http_code} %{size_download}' " +
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

TEST(H2Upstream, AnOriginThatDoesNotSpeakHttp2IsA502) {
  Origin origin;  // HTTP/1.1 only: it answers the HTTP/2 preface with an HTTP/1.1 error
  Proxy proxy(grpc_config(h2_upstream("wrong", origin.port()),
                          "  - name: all\n    match: { path_prefix: / }\n    upstream: wrong\n"));
  const auto target = "http://127.0.0.1:" + std::to_string(proxy.port()) + "/x";
  EXPECT_EQ(command_output(
                "curl -s --http2-prior-knowledge -o /dev/null -w '%{http_code}' " + target, 20),
            "502");
  EXPECT_EQ(command_output("curl -s --http1.1 -o /dev/null -w '%{http_code}' " + target, 20),
            "502");
}

TEST(H2Upstream, StreamsAGoawayRefusedGoAgainOnANewConnectionAndNoneRunsTwice) {
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
