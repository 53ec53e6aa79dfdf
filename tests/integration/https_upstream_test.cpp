// https upstreams: the proxy verifies the origin's certificate (chain to ca_file or the
// system CAs, name or IP in the SAN, validity) before sending anything, pools the TLS
// connections like plain ones, and answers 502 for an origin it cannot trust.
#include <gtest/gtest.h>

#include "harness.hpp"
#include "proxy_yaml.hpp"
#include "test_pki.hpp"
#include "tls_client.hpp"

namespace floodgate::testing {
namespace {

using namespace std::chrono_literals;

struct HttpsUpstream : ::testing::Test {
  TestPki pki;
  TestPki::Files leaf = pki.issue("localhost", {"localhost"}, {"127.0.0.1"});
  Origin origin{leaf.cert, leaf.key};

  std::string config(const std::string& url) {
    return ProxyYaml{.upstream_url = url, .upstream_extra = ca_file_key(pki.ca_file())}.text();
  }
};

TEST_F(HttpsUpstream, VerifiedByNameAndTheConnectionIsReused) {
  Proxy proxy(config(https_url(origin)));
  for (int i = 0; i < 2; ++i) {
    auto r = get(proxy.port(), "/echo/" + std::to_string(i));  // a new client connection each
    ASSERT_TRUE(r);
    EXPECT_EQ(r->result_int(), 200);
    EXPECT_NE(r->body().find("\"target\":\"/echo/" + std::to_string(i) + "\""), std::string::npos)
        << r->body();
  }
  // One upstream connection for both, plus the one this stats query opens; the proxy asked
  // for the origin by name (SNI), the stats query asked for none.
  auto stats = origin.stats();
  EXPECT_NE(stats.find("\"requests\":2,\"connections\":2,"), std::string::npos) << stats;
  EXPECT_NE(stats.find("\"server_names\":[\"localhost\",\"\"]"), std::string::npos) << stats;
}

TEST_F(HttpsUpstream, IpLiteralIsVerifiedAgainstTheIpSan) {
  Proxy proxy(config(https_url(origin, "127.0.0.1")));
  auto r = get(proxy.port(), "/x");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->result_int(), 200);
  EXPECT_EQ(r->body(), "ok");
}

// RFC 6066 3: "Literal IPv4 and IPv6 addresses are not permitted in HostName".
TEST_F(HttpsUpstream, IpLiteralSendsNoSni) {
  Proxy proxy(config(https_url(origin, "127.0.0.1")));
  ASSERT_EQ(get(proxy.port(), "/x")->result_int(), 200);
  auto stats = origin.stats();
  EXPECT_NE(stats.find("\"server_names\":[\"\",\"\"]"), std::string::npos) << stats;
}

TEST_F(HttpsUpstream, LargeBodiesStreamBothWays) {
  Proxy proxy(config(https_url(origin)));
  Client c(proxy.port());
  std::string body(1 << 20, 'b');
  auto post =
      c.request("POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: " + std::to_string(body.size()) +
                "\r\n\r\n" + body);
  ASSERT_TRUE(post);
  EXPECT_EQ(post->result_int(), 200);
  EXPECT_NE(post->body().find("\"body_bytes\":1048576"), std::string::npos) << post->body();
  auto chunked = c.request("GET /bytes/2000000?chunked=1 HTTP/1.1\r\nHost: t\r\n\r\n");
  ASSERT_TRUE(chunked);
  EXPECT_EQ(chunked->body().size(), 2'000'000u);
}

TEST_F(HttpsUpstream, TlsOnBothSides) {
  auto front = pki.issue("shop.test", {"shop.test"});
  Proxy proxy(ProxyYaml{.upstream_url = https_url(origin),
                        .listen = tls_listen({front}),
                        .upstream_extra = ca_file_key(pki.ca_file())}
                  .text());
  TlsOptions o;
  o.sni = "shop.test";
  o.ca_file = pki.ca_file();
  TlsClient c(proxy.port(), o);
  ASSERT_TRUE(c.ok()) << c.error();
  for (int i = 0; i < 3; ++i) {
    auto r = c.request("GET /echo HTTP/1.1\r\nHost: shop.test\r\n\r\n");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->result_int(), 200);
  }
  EXPECT_EQ(origin.requests(), 3u);
}

// Two routes: /bad to an origin that must not be trusted (verified against `bad_ca_file`, or
// the system CAs when it is empty), everything else to a good one.
std::string bad_and_good(const Origin& bad, const std::string& bad_ca_file, const Origin& good,
                         const std::string& good_ca_file) {
  return "server:\n  threads: 1\n  listen: [127.0.0.1:0]\nupstreams:\n"
         "  bad: { url: \"" +
         https_url(bad) + "\"" + (bad_ca_file.empty() ? "" : ", " + ca_file_key(bad_ca_file)) +
         " }\n  good: { url: \"" + https_url(good) + "\", " + ca_file_key(good_ca_file) +
         " }\nroutes:\n"
         "  - name: bad\n    match: { path_prefix: /bad }\n    upstream: bad\n"
         "  - name: good\n    match: { path_prefix: / }\n    upstream: good\n";
}

// 502, the origin sees no request, and the proxy keeps serving the good origin on the other
// route (and refuses the bad one again: nothing about it is cached as acceptable).
void expect_untrusted(const TestPki& pki, const Origin& good, const TestPki::Files& bad_cert,
                      const std::string& bad_ca_file) {
  Origin bad(bad_cert.cert, bad_cert.key);
  Proxy proxy(bad_and_good(bad, bad_ca_file, good, pki.ca_file()));
  for (int i = 0; i < 2; ++i) {
    auto refused = get(proxy.port(), "/bad/x");
    ASSERT_TRUE(refused);
    EXPECT_EQ(refused->result_int(), 502) << refused->body();
    auto fine = get(proxy.port(), "/fine");
    ASSERT_TRUE(fine);
    EXPECT_EQ(fine->result_int(), 200);
  }
  EXPECT_EQ(bad.requests(), 0u);
}

TEST_F(HttpsUpstream, ExpiredCertificateIs502) {
  expect_untrusted(pki, origin, pki.issue("localhost", {"localhost"}, {"127.0.0.1"}, -240h, -24h),
                   pki.ca_file());
}

TEST_F(HttpsUpstream, CertificateForAnotherHostIs502) {
  expect_untrusted(pki, origin, pki.issue("other.test", {"other.test"}), pki.ca_file());
}

TEST_F(HttpsUpstream, UnknownCaIs502) {
  TestPki stranger;
  auto foreign = stranger.issue("localhost", {"localhost"}, {"127.0.0.1"});
  expect_untrusted(pki, origin, foreign, "");             // the system CAs do not know it
  expect_untrusted(pki, origin, foreign, pki.ca_file());  // nor does our CA
  expect_untrusted(pki, origin, pki.self_signed("localhost", {"localhost"}), "");
}

}  // namespace
}  // namespace floodgate::testing
