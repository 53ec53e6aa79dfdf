// HTTP/3 (issue 40) on the real binary, in front of the real origin, with a real HTTP/3 client:
// ngtcp2's example client (`gtlsclient`, Debian's ngtcp2-client from bookworm-backports,
// installed by scripts/install-deps.sh). It prints every response field it receives on stderr
// ("http: stream 0x0 [:status: 200]"), which is what these tests read.
#include <gtest/gtest.h>

#include <boost/json.hpp>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "floodgate_process.hpp"
#include "proxy_yaml.hpp"
#include "redis_server.hpp"
#include "test_pki.hpp"

namespace floodgate::testing {
namespace {

using namespace std::chrono_literals;

// One response as gtlsclient printed it: its fields by name (":status" among them).
using H3Response = std::map<std::string, std::string>;

// The responses to `urls` (one stream each, on one connection), by stream id in order
// ("0x0", "0x4", ...). `options`: more of gtlsclient's options.
std::map<std::string, H3Response> h3_fetch(std::uint16_t port, const std::vector<std::string>& urls,
                                           const std::string& options = "") {
  std::string command =
      "/usr/bin/gtlsclient --exit-on-all-streams-close --no-quic-dump "
      "--no-http-dump --timeout=5s " +
      options + " 127.0.0.1 " + std::to_string(port);
  for (const auto& u : urls) command += " '" + u + "'";
  // gtlsclient writes what it received on stderr, which command_output drops: moved to stdout.
  std::istringstream in(command_output("sh -c \"exec 2>&1; " + command + "\"", 30));
  std::map<std::string, H3Response> out;
  const std::string prefix = "http: stream ";
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(prefix, 0) != 0) continue;
    const auto id_end = line.find(' ', prefix.size());
    const auto open = line.find(" [", prefix.size());
    if (id_end == std::string::npos || open != id_end || line.back() != ']') continue;
    const auto field = line.substr(open + 2, line.size() - open - 3);
    const auto colon = field.find(": ", 1);  // a pseudo-header's name starts with ':'
    if (colon == std::string::npos) continue;
    out[line.substr(prefix.size(), id_end - prefix.size())][field.substr(0, colon)] =
        field.substr(colon + 2);
  }
  return out;
}

std::string h3_field(const H3Response& r, const std::string& name) {
  auto it = r.find(name);
  return it == r.end() ? std::string() : it->second;
}

// The binary with one TLS listener speaking h3, h2 and http1 (a certificate for localhost),
// its access log on stdout, in front of `origin`.
struct H3Binary {
  Origin origin;
  TestPki pki;
  TestPki::Files cert = pki.issue("localhost", {"localhost"}, {"127.0.0.1"});
  std::uint16_t port = free_port();
  std::uint16_t admin = free_port();
  std::string path;
  std::unique_ptr<ChildProcess> fg;

  explicit H3Binary(const std::string& routes, const std::string& server_extra = "",
                    const std::string& log = "{ access_log: true }") {
    path = write_temp_file(
        "h3-" + std::to_string(port) + ".yaml",
        "server:\n  threads: 2\n  listen:\n    - { address: \"127.0.0.1:" + std::to_string(port) +
            "\", protocols: [h3, h2, http1], tls: { certificates: [{ cert: \"" + cert.chain +
            "\", key: \"" + cert.key + "\" }] } }\n" + server_extra +
            "admin: { listen: \"127.0.0.1:" + std::to_string(admin) + "\" }\nlog: " + log +
            "\nupstreams:\n  origin: { url: \"" + http_url(origin) + "\" }\nroutes:\n" + routes);
    fg = start_floodgate(path);
    wait_serving(admin, "/healthz");
  }
  ~H3Binary() {
    fg.reset();
    std::filesystem::remove(path);
  }
  std::string url(const std::string& target) const {
    return "https://localhost:" + std::to_string(port) + target;
  }
};

const std::string kH3AllRoute =
    "  - name: all\n    match: { path_prefix: / }\n    upstream: origin\n";

TEST(Http3, AGetAndAPostWithABodyReachTheOrigin) {
  H3Binary b(kH3AllRoute);
  get(b.origin.port(), "/__reset");
  auto got = h3_fetch(b.port, {b.url("/echo/get?x=1")});
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(h3_field(got["0x0"], ":status"), "200");

  // A body of 300,000 bytes (more than one flow-control window) as the client's POST.
  std::filesystem::create_directories(b.pki.dir() + "/out");
  const auto body_file = b.pki.dir() + "/body.bin";
  std::string body(300'000, '\0');
  std::uint64_t fnv = 1469598103934665603ull;
  for (std::size_t i = 0; i < body.size(); ++i) {
    body[i] = static_cast<char>((i * 131 + 7) % 251);
    fnv = (fnv ^ static_cast<unsigned char>(body[i])) * 1099511628211ull;
  }
  std::ofstream(body_file, std::ios::binary) << body;
  auto posted = h3_fetch(b.port, {b.url("/echo/post")},
                         "-m POST -d " + body_file + " --download=" + b.pki.dir() + "/out");
  ASSERT_EQ(posted.size(), 1u);
  EXPECT_EQ(h3_field(posted["0x0"], ":status"), "200");
  std::ifstream saved(b.pki.dir() + "/out/post");
  std::stringstream text;
  text << saved.rdbuf();
  boost::system::error_code ec;
  auto echo = boost::json::parse(text.str(), ec);
  ASSERT_FALSE(ec) << text.str();
  EXPECT_EQ(echo.at("method").as_string(), "POST");
  EXPECT_EQ(echo.at("body_bytes").as_int64(), 300'000);
  EXPECT_EQ(echo.at("body_fnv").as_string(), std::to_string(fnv));
  EXPECT_EQ(b.origin.requests(), 2u);
  // The access log says which protocol the request came by.
  std::string seen;
  EXPECT_NE(wait_for_line(*b.fg, "\"protocol\":\"h3\",\"method\":\"POST\"", 5s, seen), "") << seen;
  // So do the metrics.
  auto scrape = get(b.admin, "/metrics");
  ASSERT_TRUE(scrape);
  EXPECT_EQ(metric(scrape->body(), "floodgate_protocol_requests_total{protocol=\"h3\"}"), 2u);
  EXPECT_EQ(metric(scrape->body(), "floodgate_protocol_requests_total{protocol=\"h2\"}"), 0u);
}

TEST(Http3, ALimitCountsEveryStreamAndARefusedOneHasRetryAfter) {
  H3Binary b(
      "  - name: api\n    match: { path_prefix: / }\n    upstream: origin\n"
      "    limits: [{ name: three, algorithm: fixed_window, limit: 3, window: 1h, key: [ip] }]\n");
  get(b.origin.port(), "/__reset");
  // Five streams on one connection: three pass, two are refused.
  std::vector<std::string> urls(5, b.url("/api"));
  auto got = h3_fetch(b.port, urls);
  ASSERT_EQ(got.size(), 5u);
  int ok = 0, refused = 0;
  for (auto& [id, r] : got) {
    if (h3_field(r, ":status") == "200") ++ok;
    if (h3_field(r, ":status") == "429") {
      ++refused;
      EXPECT_EQ(h3_field(r, "x-ratelimit-limit"), "3") << id;
      EXPECT_EQ(h3_field(r, "x-ratelimit-remaining"), "0") << id;
      EXPECT_GT(std::stoi(h3_field(r, "retry-after")), 0) << id;
      EXPECT_EQ(h3_field(r, "content-type"), "application/json") << id;
    }
  }
  EXPECT_EQ(ok, 3);
  EXPECT_EQ(refused, 2);
  EXPECT_EQ(b.origin.requests(), 3u);  // refused streams never reach it
}

TEST(Http3, TheTcpSideAdvertisesItWithAltSvc) {
  H3Binary b(kH3AllRoute);
  const auto alt = "h3=\":" + std::to_string(b.port) + "\"; ma=86400";
  for (const char* version : {"--http1.1", "--http2"}) {
    auto headers = command_output("curl -s -o /dev/null -D - " + std::string(version) +
                                      " --cacert " + b.pki.ca_file() + " " + b.url("/x"),
                                  20);
    for (auto& c : headers) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    EXPECT_NE(headers.find("alt-svc: " + alt), std::string::npos) << version << "\n" << headers;
  }
}

TEST(Http3, AHeadPastMaxHeaderBytesIs431) {
  H3Binary b(kH3AllRoute, "  max_header_bytes: 1024\n");
  get(b.origin.port(), "/__reset");
  auto got = h3_fetch(b.port, {b.url("/" + std::string(2000, 'a'))});
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(h3_field(got["0x0"], ":status"), "431");
  EXPECT_EQ(b.origin.requests(), 0u);
}

// JA4 over QUIC: the ClientHello GnuTLS received is fingerprinted as over TCP, with JA4's `q`
// for its transport. A limit keyed on it alone counts gtlsclient's streams together (a missing
// part would skip the limit), and the access log records the value.
TEST(Http3, Ja4IsTakenFromTheQuicClientHello) {
  H3Binary b(
      "  - name: api\n    match: { path_prefix: / }\n    upstream: origin\n"
      "    limits: [{ name: per-stack, algorithm: fixed_window, limit: 2, window: 1h, "
      "key: [\"tls:ja4\"] }]\n",
      "", "{ access_log: true, replay_fields: auto }");
  std::vector<std::string> urls(3, b.url("/stack"));
  auto got = h3_fetch(b.port, urls);
  ASSERT_EQ(got.size(), 3u);
  int ok = 0, refused = 0;
  for (auto& [id, r] : got) {
    ok += h3_field(r, ":status") == "200";
    refused += h3_field(r, ":status") == "429";
  }
  EXPECT_EQ(ok, 2);
  EXPECT_EQ(refused, 1);
  std::string seen;
  const auto line = wait_for_line(*b.fg, "\"tls:ja4\":\"q13", 5s, seen);
  EXPECT_NE(line, "") << seen;
}

}  // namespace
}  // namespace floodgate::testing
