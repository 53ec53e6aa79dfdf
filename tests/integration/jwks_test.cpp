// jwt.jwks through the proxy: an identity provider (https_files.py, HTTPS with a test CA)
// publishes its keys; floodgate fetches them at start, verifies tokens by kid, fetches again
// when a token names a kid it has not seen (a key rotation), keeps the last good set while
// the provider is down, and drops it for a reload that names another issuer.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "../support/jwt_signing.hpp"
#include "floodgate_process.hpp"
#include "harness.hpp"
#include "identity_provider.hpp"
#include "proxy_yaml.hpp"
#include "test_pki.hpp"

namespace floodgate::testing {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

std::string token(const Key& key, const std::string& kid, const std::string& tenant) {
  const auto alg = EVP_PKEY_is_a(key.get(), "RSA")  ? "RS256"
                   : EVP_PKEY_is_a(key.get(), "EC") ? "ES256"
                                                    : "EdDSA";
  return sign(alg, header_with_kid(alg, kid), R"({"tenant":")" + tenant + R"(","exp":4102444800})",
              key);
}

int status(std::uint16_t port, const std::string& bearer) {
  auto r = get(port, "/x", "Authorization: Bearer " + bearer + "\r\n");
  return r ? r->result_int() : -1;
}

std::uint64_t jwks_metric(const std::string& text, const std::string& series) {
  auto at = text.find("\n" + series + " ");
  return at == std::string::npos ? 0 : std::stoull(text.substr(at + series.size() + 2));
}

TEST(Jwks, KeysAreFetchedChosenByKidRotatedAndKeptWhileTheProviderIsDown) {
  TestPki pki;
  IdentityProvider idp(pki);
  const Key first = rsa_key(), second = ed25519_key(), stranger = ec_key();
  idp.publish({jwk_of(first, "2026-11")});
  Origin origin;
  LogCapture log;
  const std::string yaml =
      ProxyYaml{.upstream_url = http_url(origin),
                .server_extra = "jwt:\n  algorithms: [RS256, ES256, EdDSA]\n  jwks: { url: \"" +
                                idp.url() + "\", refresh: 1h, ca_file: \"" + pki.ca_file() +
                                "\" }\n",
                .route_extra =
                    "    limits:\n      - { name: per-tenant, algorithm: fixed_window, "
                    "limit: 100, window: 1h, key: [\"jwt:tenant\"] }\n"}
          .text();
  Proxy proxy(yaml, nullptr, nullptr, log.logger());
  const auto port = proxy.port();
  // Fetched before serving: the first request already verifies.
  EXPECT_EQ(status(port, token(first, "2026-11", "acme")), 200);
  EXPECT_EQ(status(port, token(stranger, "2026-11", "acme")), 401);  // not the issuer's key
  EXPECT_EQ(idp.hits(), 1u);

  // The provider rotates to an Ed25519 key: a token with the new kid makes floodgate fetch
  // again (that request is refused: it is not held up waiting for the provider).
  idp.publish({jwk_of(first, "2026-11"), jwk_of(second, "2026-12")});
  EXPECT_EQ(status(port, token(second, "2026-12", "acme")), 401);
  bool rotated = false;
  for (int i = 0; i < 40 && !rotated; ++i) {
    std::this_thread::sleep_for(100ms);
    rotated = status(port, token(second, "2026-12", "acme")) == 200;
  }
  const auto rotated_at = std::chrono::steady_clock::now();  // the kid-driven fetch was before
  EXPECT_TRUE(rotated) << "the new kid was never fetched";
  EXPECT_EQ(idp.hits(), 2u);
  // Unknown kids do not make floodgate hammer the provider: at most one such fetch per 10 s.
  for (int i = 0; i < 20; ++i) EXPECT_EQ(status(port, token(stranger, "bogus", "acme")), 401);
  std::this_thread::sleep_for(600ms);
  EXPECT_EQ(idp.hits(), 2u);

  // The provider goes down. Once the 10 s since the last kid-driven fetch have passed, a new
  // kid makes floodgate fetch again: the fetch fails, and the last good set stays in use.
  idp.down(true);
  std::this_thread::sleep_until(rotated_at + 10500ms);
  EXPECT_EQ(status(port, token(stranger, "2027-01", "acme")), 401);
  bool failed = false;
  for (int i = 0; i < 40 && !failed; ++i) {
    std::this_thread::sleep_for(100ms);
    failed = jwks_metric(admin::render_prometheus(proxy.metrics()),
                         R"(floodgate_jwks_fetches_total{result="error"})") == 1;
  }
  EXPECT_TRUE(failed);
  EXPECT_EQ(status(port, token(first, "2026-11", "acme")), 200);
  EXPECT_EQ(status(port, token(second, "2026-12", "globex")), 200);
  auto text = admin::render_prometheus(proxy.metrics());
  EXPECT_EQ(jwks_metric(text, R"(floodgate_jwks_fetches_total{result="ok"})"), 2u);
  EXPECT_EQ(jwks_metric(text, "floodgate_jwks_keys"), 2u);
  bool warned = false;
  for (const auto& line : log.lines())
    warned |= line.find("503; keeping the 2 key(s) fetched") != std::string::npos;
  EXPECT_TRUE(warned) << "no warning that the last good set is kept";

  // A reload naming another issuer (here another path, still down) drops the old keys at
  // once: another issuer's keys are never trusted for it.
  proxy.source().publish(load_or_fail(substitute(yaml, "jwks.json", "jwks.json?v=2")));
  bool dropped = false;
  for (int i = 0; i < 40 && !dropped; ++i) {
    std::this_thread::sleep_for(100ms);
    dropped = status(port, token(first, "2026-11", "acme")) == 401;
  }
  EXPECT_TRUE(dropped);
}

}  // namespace
}  // namespace floodgate::testing
