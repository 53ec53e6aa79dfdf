// TLS operations: on the real binary, SIGHUP re-reads certificate files in place (new
// connections get the new certificate, open ones keep working, a broken key is refused and
// the last good certificate keeps serving); and the TLS / WebSocket metrics on /metrics.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <regex>
#include <sstream>
#include <thread>

#include "admin/admin_server.hpp"
#include "floodgate_process.hpp"
#include "harness.hpp"
#include "proxy_yaml.hpp"
#include "test_pki.hpp"
#include "tls_client.hpp"
#include "ws_client.hpp"

namespace floodgate::testing {
namespace {

using namespace std::chrono_literals;

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Rewrites `path` in place (same inode), as an editor or `cat new > old` would.
void overwrite(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  ASSERT_TRUE(out) << "cannot write " << path;
}

const std::string kGet = "GET /hello HTTP/1.1\r\nHost: shop.test\r\n\r\n";

TEST(TlsReload, SighupRereadsCertificateFilesAndRefusesABrokenKey) {
  TestPki pki;
  auto first = pki.issue("shop.test", {"shop.test"});
  auto renewed = pki.issue("renewed.shop.test", {"shop.test"});
  // The files the config names; the test rewrites them between reloads.
  TestPki::Files serving{pki.dir() + "/serving.pem", pki.dir() + "/serving.key", ""};
  overwrite(serving.cert, read_file(first.cert));
  overwrite(serving.key, read_file(first.key));

  Origin origin;
  auto config_path = pki.dir() + "/floodgate.yaml";
  overwrite(config_path, ProxyYaml{.upstream_url = http_url(origin),
                                   .listen = tls_listen({serving}),
                                   .server_extra = "  timeouts: { drain: 2s }\n"}
                             .text());
  auto fg = start_floodgate(config_path);
  std::string log;
  auto up = wait_for_line(*fg, "on port(s) ", 10s, log);
  std::smatch m;
  ASSERT_TRUE(std::regex_search(up, m, std::regex(R"(on port\(s\) (\d+))"))) << log;
  auto port = static_cast<std::uint16_t>(std::stoi(m[1]));

  TlsOptions verified;
  verified.sni = "shop.test";
  verified.ca_file = pki.ca_file();
  TlsClient before(port, verified);
  ASSERT_TRUE(before.ok()) << before.error();
  EXPECT_EQ(before.peer_name(), "shop.test");
  auto r = before.request(kGet);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->result_int(), 200);

  // Renewal: the same paths now hold a new certificate (new CN, same SAN) and its key.
  overwrite(serving.cert, read_file(renewed.cert));
  overwrite(serving.key, read_file(renewed.key));
  kill(fg->pid(), SIGHUP);
  EXPECT_NE(wait_for_line(*fg, "reload: config from " + config_path + " is now serving", 5s, log),
            "")
      << log;
  {
    TlsClient after(port, verified);
    ASSERT_TRUE(after.ok()) << after.error();
    EXPECT_EQ(after.peer_name(), "renewed.shop.test");
    auto ar = after.request(kGet);
    ASSERT_TRUE(ar);
    EXPECT_EQ(ar->result_int(), 200);
  }
  // The connection from before the reload keeps its certificate and keeps serving.
  r = before.request(kGet);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->result_int(), 200);
  EXPECT_EQ(before.peer_name(), "shop.test");

  // A broken key: the reload is refused, naming the file, and the renewed certificate stays.
  overwrite(serving.key, "-----BEGIN PRIVATE KEY-----\nnot a key at all\n");
  kill(fg->pid(), SIGHUP);
  std::string refusal_log;
  auto refused = wait_for_line(*fg, "reload rejected: 1 error; the previous config keeps serving",
                               5s, refusal_log);
  log += refusal_log;
  EXPECT_NE(refused, "") << log;
  EXPECT_NE(refusal_log.find("reload rejected: " + config_path), std::string::npos) << log;
  EXPECT_NE(refusal_log.find(serving.key), std::string::npos) << log;
  for (int i = 0; i < 3; ++i) {
    TlsClient later(port, verified);
    ASSERT_TRUE(later.ok()) << later.error();
    EXPECT_EQ(later.peer_name(), "renewed.shop.test");
    auto lr = later.request(kGet);
    ASSERT_TRUE(lr);
    EXPECT_EQ(lr->result_int(), 200);
  }
  r = before.request(kGet);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->result_int(), 200);

  auto code = fg->signal_and_wait(SIGTERM, 5s);
  ASSERT_TRUE(code);
  EXPECT_EQ(*code, 0);
  EXPECT_EQ(origin.requests(), 7u);
}

// An in-process proxy with one TLS listener and the admin listener the config asks for
// (port 0, as main.cpp would start it), reading the proxy's own metrics.
struct TlsMetrics : ::testing::Test {
  TestPki pki;
  TestPki::Files shop = pki.issue("shop.test", {"shop.test"});
  Origin origin;
  Proxy proxy{ProxyYaml{.upstream_url = http_url(origin), .listen = tls_listen({shop})}.text() +
              "admin: { listen: 127.0.0.1:0 }\n"};
  admin::AdminState state;
  spdlog::logger log{"admin", std::make_shared<spdlog::sinks::stderr_sink_mt>()};
  admin::AdminServer admin{proxy.source().get()->admin.listen.value(), proxy.source(),
                           proxy.metrics(), state, log};

  void SetUp() override { admin.start(); }

  // The value of an unlabelled series on /metrics (nullopt when the scrape or the series is
  // missing).
  std::optional<std::int64_t> metric(const std::string& series) {
    auto res = get(admin.port(), "/metrics");
    if (!res || res->result_int() != 200) return std::nullopt;
    const auto& text = res->body();
    auto at = text.find("\n" + series + " ");
    if (at == std::string::npos) return std::nullopt;
    return std::stoll(text.substr(at + series.size() + 2));
  }
  // Polls until `ok(value)` holds (up to 2 s); returns the last value seen.
  template <typename Pred>
  std::optional<std::int64_t> poll(const std::string& series, Pred ok) {
    std::optional<std::int64_t> v;
    for (int i = 0; i < 100; ++i) {
      if (i) std::this_thread::sleep_for(20ms);
      v = metric(series);
      if (v && ok(*v)) break;
    }
    return v;
  }
  WsOptions wss() const {
    return {.host = "shop.test", .tls = true, .sni = "shop.test", .ca_file = pki.ca_file()};
  }
};

const std::string kFailures = "floodgate_tls_handshake_failures_total";
const std::string kWebSockets = "floodgate_active_websockets";

TEST_F(TlsMetrics, PlainHttpOnTheTlsPortCountsAsAHandshakeFailure) {
  TlsClient good(proxy.port(), {.sni = "shop.test"});
  ASSERT_TRUE(good.ok()) << good.error();
  EXPECT_EQ(good.request(kGet)->result_int(), 200);
  EXPECT_EQ(metric(kFailures), 0) << "a completed handshake is no failure";

  Client plain(proxy.port());
  plain.send(kGet);
  plain.read_raw(1 << 16, 2s);
  EXPECT_TRUE(plain.closed_by_peer(100ms));
  auto failures = poll(kFailures, [](std::int64_t v) { return v >= 1; });
  ASSERT_TRUE(failures);
  EXPECT_GE(*failures, 1);
  EXPECT_EQ(origin.requests(), 1u);
}

TEST_F(TlsMetrics, ActiveWebSocketsFollowsOpenTunnels) {
  EXPECT_EQ(metric(kWebSockets), 0);
  {
    WsClient ws(proxy.port(), wss());
    ASSERT_TRUE(ws.open()) << ws.error() << " (status " << ws.status() << ")";
    EXPECT_EQ(poll(kWebSockets, [](std::int64_t v) { return v == 1; }), 1);
    ASSERT_TRUE(ws.send_text("ping")) << ws.last_error().message();
    EXPECT_EQ(ws.read(), "ping") << ws.last_error().message();
    EXPECT_EQ(metric(kWebSockets), 1);
    EXPECT_TRUE(ws.close()) << ws.last_error().message();
  }
  EXPECT_EQ(poll(kWebSockets, [](std::int64_t v) { return v == 0; }), 0);

  // A client that vanishes without a close frame ends its tunnel too.
  {
    WsClient ws(proxy.port(), wss());
    ASSERT_TRUE(ws.open()) << ws.error() << " (status " << ws.status() << ")";
    EXPECT_EQ(poll(kWebSockets, [](std::int64_t v) { return v == 1; }), 1);
  }
  EXPECT_EQ(poll(kWebSockets, [](std::int64_t v) { return v == 0; }), 0);
  EXPECT_EQ(origin.requests(), 2u);
}

}  // namespace
}  // namespace floodgate::testing
