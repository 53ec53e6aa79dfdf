// TLS termination: a listener with `tls` serves HTTPS with certificates chosen by SNI,
// honours min_version, speaks HTTP/1.1 only, swaps certificates on reload for new
// connections only, and drops clients that do not speak TLS before anything is forwarded.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <thread>

#include "harness.hpp"
#include "proxy_yaml.hpp"
#include "test_pki.hpp"
#include "tls_client.hpp"

namespace floodgate::testing {
namespace {

using namespace std::chrono_literals;

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

TlsOptions with_sni(const std::string& sni) {
  TlsOptions o;
  o.sni = sni;
  return o;
}

struct TlsTermination : ::testing::Test {
  TestPki pki;
  TestPki::Files shop = pki.issue("shop.test", {"shop.test"});
  TestPki::Files api = pki.issue("api.test", {"api.test"});
  Origin origin;

  std::string config(const std::vector<TestPki::Files>& certs, const std::string& min_version = "",
                     const std::string& server_extra = "") {
    return ProxyYaml{.upstream_url = http_url(origin),
                     .listen = tls_listen(certs, min_version),
                     .server_extra = server_extra}
        .text();
  }
  TlsOptions verified(const std::string& host) {
    auto o = with_sni(host);
    o.ca_file = pki.ca_file();
    return o;
  }
};

const std::string kHello = "GET /hello HTTP/1.1\r\nHost: shop.test\r\n\r\n";

TEST_F(TlsTermination, Tls13HandshakeAndAGet) {
  Proxy proxy(config({shop}));
  TlsClient c(proxy.port(), verified("shop.test"));
  ASSERT_TRUE(c.ok()) << c.error();
  EXPECT_EQ(c.version(), "TLSv1.3");
  auto r = c.request(kHello);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->result_int(), 200);
  EXPECT_EQ(r->body(), "ok");
  EXPECT_EQ(origin.requests(), 1u);
}

TEST_F(TlsTermination, Tls12IsAccepted) {
  Proxy proxy(config({shop}));
  auto o = verified("shop.test");
  o.max_version = "1.2";
  TlsClient c(proxy.port(), o);
  ASSERT_TRUE(c.ok()) << c.error();
  EXPECT_EQ(c.version(), "TLSv1.2");
  auto r = c.request(kHello);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->result_int(), 200);
}

TEST_F(TlsTermination, Tls11IsRefused) {
  Proxy proxy(config({shop}));
  TlsOptions o = with_sni("shop.test");
  o.min_version = o.max_version = "1.1";
  TlsClient old(proxy.port(), o);
  EXPECT_FALSE(old.ok());
  EXPECT_EQ(origin.requests(), 0u);
  TlsClient current(proxy.port(), with_sni("shop.test"));  // and the listener carries on
  ASSERT_TRUE(current.ok()) << current.error();
  EXPECT_EQ(current.request(kHello)->result_int(), 200);
}

TEST_F(TlsTermination, MinVersion13RefusesTls12) {
  Proxy proxy(config({shop}, "1.3"));
  TlsOptions o = with_sni("shop.test");
  o.max_version = "1.2";
  TlsClient v12(proxy.port(), o);
  EXPECT_FALSE(v12.ok()) << "negotiated " << v12.version();
  TlsClient v13(proxy.port(), with_sni("shop.test"));
  ASSERT_TRUE(v13.ok()) << v13.error();
  EXPECT_EQ(v13.version(), "TLSv1.3");
  EXPECT_EQ(v13.request(kHello)->result_int(), 200);
  EXPECT_EQ(origin.requests(), 1u);
}

// ALPN offers the listener's protocols in its order: by default h2, then http/1.1; a listener
// that lists only http1 never answers h2.
TEST_F(TlsTermination, AlpnOffersTheListenersProtocolsInItsOrder) {
  Proxy both(config({shop}));
  TlsOptions o = with_sni("shop.test");
  o.alpn = {"http/1.1", "h2"};
  TlsClient h2(both.port(), o);
  ASSERT_TRUE(h2.ok()) << h2.error();
  EXPECT_EQ(h2.alpn(), "h2");  // the server's preference, not the client's order
  o.alpn = {"http/1.1"};
  TlsClient h1(both.port(), o);
  ASSERT_TRUE(h1.ok()) << h1.error();
  EXPECT_EQ(h1.alpn(), "http/1.1");
  EXPECT_EQ(h1.request(kHello)->result_int(), 200);

  auto only_http1 =
      substitute(config({shop}), "      tls:\n", "      protocols: [http1]\n      tls:\n");
  Proxy http1(only_http1);
  o.alpn = {"h2", "http/1.1"};
  TlsClient c(http1.port(), o);
  ASSERT_TRUE(c.ok()) << c.error();
  EXPECT_EQ(c.alpn(), "http/1.1");
  EXPECT_EQ(c.request(kHello)->result_int(), 200);
}

TEST_F(TlsTermination, SniChoosesTheCertificateAndTheFirstIsTheDefault) {
  Proxy proxy(config({shop, api}));
  auto served = [&](const std::string& sni) {
    TlsClient c(proxy.port(), with_sni(sni));
    EXPECT_TRUE(c.ok()) << "SNI \"" << sni << "\": " << c.error();
    return c.peer_name();
  };
  EXPECT_EQ(served("api.test"), "api.test");
  EXPECT_EQ(served("shop.test"), "shop.test");
  EXPECT_EQ(served("unknown.test"), "shop.test");
  EXPECT_EQ(served(""), "shop.test");

  TlsClient api_client(proxy.port(), verified("api.test"));  // the chain and name check out
  ASSERT_TRUE(api_client.ok()) << api_client.error();
  EXPECT_EQ(api_client.request("GET / HTTP/1.1\r\nHost: api.test\r\n\r\n")->result_int(), 200);
}

TEST_F(TlsTermination, OriginSeesForwardedProtoHttps) {
  Proxy proxy(config({shop}));
  TlsClient c(proxy.port(), with_sni("shop.test"));
  ASSERT_TRUE(c.ok()) << c.error();
  auto r = c.request("GET /echo HTTP/1.1\r\nHost: shop.test\r\n\r\n");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->result_int(), 200);
  EXPECT_NE(lower(r->body()).find(R"(["x-forwarded-proto","https"])"), std::string::npos)
      << r->body();
}

TEST_F(TlsTermination, KeepAliveConnectionServesManyRequests) {
  Proxy proxy(config({shop}));
  TlsClient c(proxy.port(), with_sni("shop.test"));
  ASSERT_TRUE(c.ok()) << c.error();
  for (int i = 0; i < 5; ++i) {
    auto r = c.request("GET /n/" + std::to_string(i) + " HTTP/1.1\r\nHost: shop.test\r\n\r\n");
    ASSERT_TRUE(r) << "request " << i;
    EXPECT_EQ(r->result_int(), 200);
  }
  // Bodies both ways, larger than a TLS record (16 KiB), on the same connection.
  std::string body(100'000, 'x');
  auto post = c.request("POST /echo HTTP/1.1\r\nHost: shop.test\r\nContent-Length: " +
                        std::to_string(body.size()) + "\r\n\r\n" + body);
  ASSERT_TRUE(post);
  EXPECT_NE(post->body().find("\"body_bytes\":100000"), std::string::npos) << post->body();
  auto big = c.request("GET /bytes/300000 HTTP/1.1\r\nHost: shop.test\r\n\r\n");
  ASSERT_TRUE(big);
  EXPECT_EQ(big->body().size(), 300'000u);
  EXPECT_EQ(origin.requests(), 7u);
}

TEST_F(TlsTermination, ReloadGivesNewConnectionsTheNewCertificate) {
  Proxy proxy(config({shop}));
  TlsClient before(proxy.port(), verified("shop.test"));
  ASSERT_TRUE(before.ok()) << before.error();
  ASSERT_EQ(before.request(kHello)->result_int(), 200);

  auto renewed = pki.issue("renewed.shop.test", {"shop.test"});
  proxy.source().publish(load_or_fail(config({renewed})));
  std::string served;
  for (int i = 0; i < 40 && served != "renewed.shop.test"; ++i) {
    if (i) std::this_thread::sleep_for(25ms);
    TlsClient after(proxy.port(), verified("shop.test"));
    EXPECT_TRUE(after.ok()) << after.error();
    served = after.peer_name();
  }
  EXPECT_EQ(served, "renewed.shop.test");

  // The connection from before the reload keeps its session and keeps working.
  auto r = before.request(kHello);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->result_int(), 200);
  EXPECT_EQ(before.peer_name(), "shop.test");
}

TEST_F(TlsTermination, ClientsNotSpeakingTlsAreDroppedBeforeTheOrigin) {
  Proxy proxy(config({shop}));
  for (std::string garbage :
       {std::string("GET / HTTP/1.1\r\nHost: shop.test\r\n\r\n"),
        std::string("\x16\x03\x01\x00\x05hello", 10), std::string(64, '\0')}) {
    Client plain(proxy.port());
    plain.send(garbage);
    plain.read_raw(1 << 16, 2s);  // an alert, a 400 or nothing: whatever, then the end
    EXPECT_TRUE(plain.closed_by_peer(100ms)) << "after " << garbage.size() << " bytes";
  }
  EXPECT_EQ(origin.requests(), 0u);
  TlsClient c(proxy.port(), with_sni("shop.test"));
  ASSERT_TRUE(c.ok()) << c.error();
  EXPECT_EQ(c.request(kHello)->result_int(), 200);
  EXPECT_EQ(origin.requests(), 1u);
}

// Beyond the basics: the handshake is part of what header_read bounds, or a client could
// hold a connection forever by never saying hello.
TEST_F(TlsTermination, SilentClientIsCutOffByTheHeaderReadTimeout) {
  Proxy proxy(config({shop}, "", "  timeouts: { header_read: 300ms }\n"));
  Client silent(proxy.port());
  auto start = std::chrono::steady_clock::now();
  silent.read_raw(1 << 16, 3s);
  EXPECT_TRUE(silent.closed_by_peer(100ms));
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
}

// Certificates are read when the config loads, so a bad one is a config error with a position
// (and a reload with it is refused), not a failure at the first handshake.
config::LoadResult load(const std::string& yaml) {
  return config::load_config_text(yaml, "tls.yaml", config::process_env());
}

std::string errors_of(const config::LoadResult& r) {
  std::string out;
  for (const auto& e : r.errors) out += "\n  " + e.to_string();
  return out;
}

constexpr int kFirstCertificateLine = 7;  // in ProxyYaml with tls_listen

TEST(TlsConfig, MissingCertificateFileIsRefusedWithItsPosition) {
  TestPki pki;
  auto shop = pki.issue("shop.test", {"shop.test"});
  TestPki::Files missing{pki.dir() + "/missing.pem", shop.key, ""};
  auto r =
      load(ProxyYaml{.upstream_url = "http://127.0.0.1:9", .listen = tls_listen({missing})}.text());
  EXPECT_FALSE(r.config);
  ASSERT_EQ(r.errors.size(), 1u) << errors_of(r);
  const auto& e = r.errors[0];
  EXPECT_EQ(e.file, "tls.yaml");
  EXPECT_EQ(e.line, kFirstCertificateLine) << e.to_string();
  EXPECT_GT(e.column, 0);
  EXPECT_NE(e.message.find("missing.pem"), std::string::npos) << e.to_string();
}

TEST(TlsConfig, KeyNotMatchingItsCertificateIsRefused) {
  TestPki pki;
  auto shop = pki.issue("shop.test", {"shop.test"});
  auto api = pki.issue("api.test", {"api.test"});
  TestPki::Files crossed{shop.cert, api.key, ""};
  auto r =
      load(ProxyYaml{.upstream_url = "http://127.0.0.1:9", .listen = tls_listen({crossed})}.text());
  EXPECT_FALSE(r.config);
  ASSERT_EQ(r.errors.size(), 1u) << errors_of(r);
  const auto& e = r.errors[0];
  EXPECT_EQ(e.file, "tls.yaml");
  EXPECT_EQ(e.line, kFirstCertificateLine) << e.to_string();
  EXPECT_GT(e.column, 0);
  EXPECT_NE(lower(e.message).find("key"), std::string::npos) << e.to_string();
}

TEST(TlsConfig, UnreadableUpstreamCaFileIsRefused) {
  TestPki pki;
  auto missing = pki.dir() + "/no-such-ca.pem";
  auto r =
      load(ProxyYaml{.upstream_url = "https://localhost:9", .upstream_extra = ca_file_key(missing)}
               .text());
  EXPECT_FALSE(r.config);
  ASSERT_EQ(r.errors.size(), 1u) << errors_of(r);
  EXPECT_EQ(r.errors[0].line, 5) << r.errors[0].to_string();  // upstreams.origin
  EXPECT_NE(r.errors[0].message.find("no-such-ca.pem"), std::string::npos)
      << r.errors[0].to_string();
}

}  // namespace
}  // namespace floodgate::testing
