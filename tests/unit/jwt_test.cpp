// Verified JWTs: tokens signed here with keys generated in-process (nothing secret on disk),
// checked by keys::verify_jwt; and public keys loaded by the config loader.

#include <gtest/gtest.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <algorithm>
#include <boost/json.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "../support/jwt_signing.hpp"
#include "floodgate/config/loader.hpp"
#include "floodgate/keys/jwt.hpp"

namespace fs = std::filesystem;
using floodgate::config::JwtAlgorithm;
using floodgate::config::JwtSettings;
using floodgate::keys::claim_text;
using floodgate::keys::JwtError;
using floodgate::keys::verify_jwt;
using namespace std::chrono_literals;

namespace {

constexpr std::int64_t kNow = 1'700'000'000;
using namespace floodgate::testing;  // keys, signing (jwt_signing.hpp)

const std::string kClaims =
    R"({"sub":"u1","tenant":"acme","tier":"gold","iss":"https://issuer.example","aud":"api",)"
    R"("exp":1700000600,"nbf":1699999000,"iat":1699999000})";

class Jwt : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    rsa_ = new Key(rsa_key());
    ec_ = new Key(ec_key());
  }
  static void TearDownTestSuite() {
    delete rsa_;
    delete ec_;
  }

  void SetUp() override {
    settings.algorithms = {JwtAlgorithm::hs256, JwtAlgorithm::rs256, JwtAlgorithm::es256};
    settings.hs256_secret = kSecret;
    settings.keys = {public_only(*rsa_), public_only(*ec_)};
    settings.issuer = "https://issuer.example";
    settings.audience = "api";
    settings.leeway = 30s;
  }

  JwtError check(const std::string& token, std::int64_t now = kNow) {
    return verify_jwt("Bearer " + token, settings, now).error;
  }

  std::string hs(const std::string& payload = kClaims) {
    return sign("HS256", header_for("HS256"), payload);
  }
  std::string rs(const std::string& payload = kClaims) {
    return sign("RS256", header_for("RS256"), payload, *rsa_);
  }
  std::string es(const std::string& payload = kClaims) {
    return sign("ES256", header_for("ES256"), payload, *ec_);
  }

  static Key* rsa_;
  static Key* ec_;
  JwtSettings settings;
};
Key* Jwt::rsa_ = nullptr;
Key* Jwt::ec_ = nullptr;

// ------------------------------------------------------------------ valid tokens

TEST_F(Jwt, ValidHs256) {
  auto r = verify_jwt("Bearer " + hs(), settings, kNow);
  ASSERT_TRUE(r.ok()) << to_string(r.error);
  EXPECT_EQ(claim_text(r.claims, "tenant"), "acme");
  EXPECT_EQ(claim_text(r.claims, "tier"), "gold");
}

TEST_F(Jwt, ValidRs256) {
  auto r = verify_jwt("Bearer " + rs(), settings, kNow);
  ASSERT_TRUE(r.ok()) << to_string(r.error);
  EXPECT_EQ(claim_text(r.claims, "sub"), "u1");
}

TEST_F(Jwt, ValidEs256) {
  auto r = verify_jwt("Bearer " + es(), settings, kNow);
  ASSERT_TRUE(r.ok()) << to_string(r.error);
  EXPECT_EQ(claim_text(r.claims, "tenant"), "acme");
}

TEST_F(Jwt, Es256SignaturesAreRandomizedAndAllVerify) {
  for (int i = 0; i < 5; ++i) EXPECT_EQ(check(es()), JwtError::none);
}

TEST_F(Jwt, TriesEveryKeyOfTheRightKind) {
  Key other_rsa = rsa_key();
  Key other_ec = ec_key();
  settings.keys = {public_only(other_rsa), public_only(other_ec), public_only(*rsa_),
                   public_only(*ec_)};
  EXPECT_EQ(check(rs()), JwtError::none);
  EXPECT_EQ(check(es()), JwtError::none);
  settings.keys = {public_only(other_rsa), public_only(other_ec)};
  EXPECT_EQ(check(rs()), JwtError::bad_signature);
  EXPECT_EQ(check(es()), JwtError::bad_signature);
}

TEST_F(Jwt, TypIsOptionalAndCaseInsensitive) {
  EXPECT_EQ(check(sign("HS256", R"({"alg":"HS256"})", kClaims)), JwtError::none);
  EXPECT_EQ(check(sign("HS256", R"({"alg":"HS256","typ":"jwt"})", kClaims)), JwtError::none);
  EXPECT_EQ(check(sign("HS256", R"({"alg":"HS256","typ":"JOSE"})", kClaims)), JwtError::malformed);
  EXPECT_EQ(check(sign("HS256", R"({"alg":"HS256","typ":1})", kClaims)), JwtError::malformed);
}

TEST_F(Jwt, DuplicateHeaderMembersMeanTheLastOne) {
  // RFC 7515 4: reject, or use the lexically last member; Boost.JSON keeps the last.
  EXPECT_EQ(check(sign("HS256", R"({"alg":"HS256","alg":"none"})", kClaims)),
            JwtError::algorithm_not_allowed);
  EXPECT_EQ(check(sign("HS256", R"({"alg":"none","alg":"HS256"})", kClaims)), JwtError::none);
}

TEST_F(Jwt, CriticalHeaderExtensionsAreRefused) {
  EXPECT_EQ(check(sign("HS256", R"({"alg":"HS256","crit":["exp"],"exp":1})", kClaims)),
            JwtError::malformed);
}

// ------------------------------------------------------------------ signatures

std::string flip_signature_byte(const std::string& token) {
  // Decode-free: flip a bit in a middle character of the signature segment, staying inside
  // the base64url alphabet ('A' <-> 'B' and so on), so the token stays well formed.
  std::string t = token;
  auto pos = t.rfind('.') + 5;
  t[pos] = t[pos] == 'A' ? 'B' : 'A';
  return t;
}

TEST_F(Jwt, ForgedSignatureIsRejected) {
  EXPECT_EQ(check(flip_signature_byte(hs())), JwtError::bad_signature);
  EXPECT_EQ(check(flip_signature_byte(rs())), JwtError::bad_signature);
  EXPECT_EQ(check(flip_signature_byte(es())), JwtError::bad_signature);
}

TEST_F(Jwt, TamperedPayloadIsRejected) {
  const std::string evil =
      R"({"sub":"u1","tenant":"other","iss":"https://issuer.example","aud":"api"})";
  for (const std::string& token : {hs(), rs(), es()}) {
    auto first = token.find('.');
    auto second = token.rfind('.');
    std::string forged = token.substr(0, first + 1) + b64url(evil) + token.substr(second);
    EXPECT_EQ(check(forged), JwtError::bad_signature) << token;
  }
}

TEST_F(Jwt, SignatureWithTheWrongSecretIsRejected) {
  EXPECT_EQ(check(sign("HS256", header_for("HS256"), kClaims, nullptr, "another-secret")),
            JwtError::bad_signature);
}

TEST_F(Jwt, TruncatedOrEmptySignaturesAreRejected) {
  auto input_of = [](std::string_view alg) {
    return b64url(header_for(alg)) + "." + b64url(kClaims);
  };
  std::string in_hs = input_of("HS256"), in_rs = input_of("RS256"), in_es = input_of("ES256");
  std::string sig_hs = hmac(kSecret, in_hs);
  std::string sig_rs = digest_sign(*rsa_, in_rs);
  std::string sig_es = der_to_jose(digest_sign(*ec_, in_es));
  ASSERT_EQ(check(in_hs + "." + b64url(sig_hs)), JwtError::none);
  ASSERT_EQ(check(in_rs + "." + b64url(sig_rs)), JwtError::none);
  ASSERT_EQ(check(in_es + "." + b64url(sig_es)), JwtError::none);
  for (const auto& [input, sig] :
       {std::pair{in_hs, sig_hs}, std::pair{in_rs, sig_rs}, std::pair{in_es, sig_es}}) {
    EXPECT_EQ(check(input + "."), JwtError::bad_signature);
    EXPECT_EQ(check(input + "." + b64url(sig.substr(0, sig.size() - 1))), JwtError::bad_signature);
    EXPECT_EQ(check(input + "." + b64url(sig + '\0')), JwtError::bad_signature);
  }
}

TEST_F(Jwt, NonCanonicalBase64IsMalformed) {
  // 32 bytes encode to 43 characters whose last one carries 2 unused bits, which must be 0.
  std::string input = b64url(header_for("HS256")) + "." + b64url(kClaims);
  std::string sig = b64url(hmac(kSecret, input));
  ASSERT_EQ(sig.size(), 43u);
  std::string odd = sig;
  odd.back() = b64url_char(b64url_index(odd.back()) | 1);
  EXPECT_EQ(check(input + "." + odd), JwtError::malformed);
  EXPECT_EQ(check(input + "." + sig), JwtError::none);
}

TEST_F(Jwt, Es256DerSignatureInsteadOfJoseIsRejected) {
  std::string input = b64url(header_for("ES256")) + "." + b64url(kClaims);
  std::string der = digest_sign(*ec_, input);
  EXPECT_EQ(check(input + "." + b64url(der)), JwtError::bad_signature);
}

// ------------------------------------------------------------------ algorithms

TEST_F(Jwt, AlgNoneIsRejectedWithAndWithoutSignature) {
  std::string input = b64url(R"({"alg":"none","typ":"JWT"})") + "." + b64url(kClaims);
  EXPECT_EQ(check(input + "."), JwtError::algorithm_not_allowed);
  EXPECT_EQ(check(input + "." + b64url("whatever")), JwtError::algorithm_not_allowed);
  std::string upper = b64url(R"({"alg":"NONE"})") + "." + b64url(kClaims) + ".";
  EXPECT_EQ(check(upper), JwtError::algorithm_not_allowed);
}

TEST_F(Jwt, AlgorithmsOutsideTheListAreRejected) {
  settings.algorithms = {JwtAlgorithm::rs256};
  EXPECT_EQ(check(hs()), JwtError::algorithm_not_allowed);
  EXPECT_EQ(check(es()), JwtError::algorithm_not_allowed);
  EXPECT_EQ(check(rs()), JwtError::none);
  // Unknown or differently spelled algorithms.
  for (const char* alg : {"HS512", "RS384", "PS256", "EdDSA", "hs256", "rs256"})
    EXPECT_EQ(check(sign("HS256", header_for(alg), kClaims)), JwtError::algorithm_not_allowed)
        << alg;
  EXPECT_EQ(check(sign("HS256", R"({"typ":"JWT"})", kClaims)), JwtError::malformed);
  EXPECT_EQ(check(sign("HS256", R"({"alg":256})", kClaims)), JwtError::malformed);
}

TEST_F(Jwt, Hs256SignedWithThePublicKeyPemIsRejectedWhenOnlyRs256IsAllowed) {
  settings.algorithms = {JwtAlgorithm::rs256};
  settings.hs256_secret.clear();
  std::string token = sign("HS256", header_for("HS256"), kClaims, nullptr, public_pem(*rsa_));
  EXPECT_EQ(check(token), JwtError::algorithm_not_allowed);
}

TEST_F(Jwt, Hs256SignedWithThePublicKeyPemIsRejectedWhenHs256UsesAnotherSecret) {
  std::string token = sign("HS256", header_for("HS256"), kClaims, nullptr, public_pem(*rsa_));
  EXPECT_EQ(check(token), JwtError::bad_signature);
  // ... and with the EC key's PEM, or the DER-less PEM body, just as well.
  EXPECT_EQ(check(sign("HS256", header_for("HS256"), kClaims, nullptr, public_pem(*ec_))),
            JwtError::bad_signature);
}

TEST_F(Jwt, KeysAreNeverUsedForAnotherAlgorithm) {
  // An RS256 header over an ES256 signature (and the reverse): each algorithm only tries its
  // own kind of key, so neither verifies.
  std::string input_rs = b64url(header_for("RS256")) + "." + b64url(kClaims);
  EXPECT_EQ(check(input_rs + "." + b64url(der_to_jose(digest_sign(*ec_, input_rs)))),
            JwtError::bad_signature);
  EXPECT_EQ(check(input_rs + "." + b64url(digest_sign(*ec_, input_rs))), JwtError::bad_signature);
  std::string input_es = b64url(header_for("ES256")) + "." + b64url(kClaims);
  EXPECT_EQ(check(input_es + "." + b64url(digest_sign(*rsa_, input_es))), JwtError::bad_signature);
  // ES256 allowed but only an RSA key configured (and the reverse).
  settings.keys = {public_only(*rsa_)};
  EXPECT_EQ(check(es()), JwtError::bad_signature);
  settings.keys = {public_only(*ec_)};
  EXPECT_EQ(check(rs()), JwtError::bad_signature);
}

TEST_F(Jwt, Es256KeyOnAnotherCurveIsNotUsed) {
  Key p384 = ec_key("P-384");
  settings.keys = {public_only(p384)};
  std::string input = b64url(header_for("ES256")) + "." + b64url(kClaims);
  std::string der = digest_sign(p384, input);
  // A P-384 signature does not fit in 64 bytes anyway; the key is skipped in any case.
  EXPECT_EQ(check(input + "." + b64url(der)), JwtError::bad_signature);
}

// ------------------------------------------------------------------ claims

TEST_F(Jwt, ExpiredBeyondLeewayIsRejected) {
  // exp = kNow + 600
  EXPECT_EQ(check(hs(), kNow + 600), JwtError::none);
  EXPECT_EQ(check(hs(), kNow + 630), JwtError::none);  // within the 30 s leeway
  EXPECT_EQ(check(hs(), kNow + 631), JwtError::expired);
  settings.leeway = 0s;
  EXPECT_EQ(check(hs(), kNow + 600), JwtError::none);
  EXPECT_EQ(check(hs(), kNow + 601), JwtError::expired);
}

TEST_F(Jwt, NotBeforeInTheFutureIsRejected) {
  std::string token = hs(R"({"iss":"https://issuer.example","aud":"api","nbf":1700000100})");
  EXPECT_EQ(check(token, kNow), JwtError::not_yet_valid);
  EXPECT_EQ(check(token, kNow + 69), JwtError::not_yet_valid);
  EXPECT_EQ(check(token, kNow + 70), JwtError::none);  // nbf - leeway
  settings.leeway = 0s;
  EXPECT_EQ(check(token, kNow + 99), JwtError::not_yet_valid);
  EXPECT_EQ(check(token, kNow + 100), JwtError::none);
}

TEST_F(Jwt, NonNumericDatesAreMalformed) {
  EXPECT_EQ(check(hs(R"({"iss":"https://issuer.example","aud":"api","exp":"1700000600"})")),
            JwtError::malformed);
  EXPECT_EQ(check(hs(R"({"iss":"https://issuer.example","aud":"api","nbf":null})")),
            JwtError::malformed);
  EXPECT_EQ(check(hs(R"({"iss":"https://issuer.example","aud":"api","exp":1700000600.5})")),
            JwtError::none);
}

TEST_F(Jwt, WrongIssuerIsRejected) {
  EXPECT_EQ(check(hs(R"({"iss":"https://evil.example","aud":"api"})")), JwtError::wrong_issuer);
  EXPECT_EQ(check(hs(R"({"aud":"api"})")), JwtError::wrong_issuer);
  EXPECT_EQ(check(hs(R"({"iss":["https://issuer.example"],"aud":"api"})")), JwtError::wrong_issuer);
  settings.issuer.clear();
  EXPECT_EQ(check(hs(R"({"iss":"https://evil.example","aud":"api"})")), JwtError::none);
}

TEST_F(Jwt, WrongAudienceIsRejected) {
  EXPECT_EQ(check(hs(R"({"iss":"https://issuer.example","aud":"web"})")), JwtError::wrong_audience);
  EXPECT_EQ(check(hs(R"({"iss":"https://issuer.example"})")), JwtError::wrong_audience);
  EXPECT_EQ(check(hs(R"({"iss":"https://issuer.example","aud":"API"})")), JwtError::wrong_audience);
  settings.audience.clear();
  EXPECT_EQ(check(hs(R"({"iss":"https://issuer.example","aud":"web"})")), JwtError::none);
}

TEST_F(Jwt, AudienceMayBeAnArray) {
  EXPECT_EQ(check(hs(R"({"iss":"https://issuer.example","aud":["web","api"]})")), JwtError::none);
  EXPECT_EQ(check(hs(R"({"iss":"https://issuer.example","aud":["web","mobile"]})")),
            JwtError::wrong_audience);
  EXPECT_EQ(check(hs(R"({"iss":"https://issuer.example","aud":[]})")), JwtError::wrong_audience);
}

// ------------------------------------------------------------------ malformed

TEST_F(Jwt, MalformedTokens) {
  std::string good = hs();
  auto first = good.find('.');
  auto second = good.rfind('.');
  EXPECT_EQ(check(good.substr(0, second)), JwtError::malformed);        // 2 segments
  EXPECT_EQ(check(good + ".abc"), JwtError::malformed);                 // 4 segments
  EXPECT_EQ(check("." + good.substr(first + 1)), JwtError::malformed);  // empty header
  EXPECT_EQ(check(good.substr(0, first) + ".." + good.substr(second + 1)), JwtError::malformed);
  EXPECT_EQ(check("a*b" + good.substr(first)), JwtError::malformed);  // bad base64
  EXPECT_EQ(check(good.substr(0, first) + "=" + good.substr(first)),
            JwtError::malformed);  // padding
  EXPECT_EQ(check(good + "="), JwtError::malformed);
  EXPECT_EQ(check("A" + good), JwtError::malformed);  // header no longer JSON (or bad length)
  // Standard base64 characters '+' and '/' are not base64url.
  std::string std_b64 = good;
  std_b64[first - 1] = '+';
  EXPECT_EQ(check(std_b64), JwtError::malformed);
}

TEST_F(Jwt, NonObjectJsonIsMalformed) {
  EXPECT_EQ(check(sign("HS256", R"(["HS256"])", kClaims)), JwtError::malformed);
  EXPECT_EQ(check(sign("HS256", R"("HS256")", kClaims)), JwtError::malformed);
  EXPECT_EQ(check(sign("HS256", R"({"alg":"HS256")", kClaims)), JwtError::malformed);
  EXPECT_EQ(check(hs(R"([1,2,3])")), JwtError::malformed);
  EXPECT_EQ(check(hs(R"(42)")), JwtError::malformed);
  EXPECT_EQ(check(hs(R"({"tenant":)")), JwtError::malformed);
  EXPECT_EQ(check(hs("not json")), JwtError::malformed);
}

TEST_F(Jwt, HugeTokenIsMalformed) {
  std::string big =
      R"({"iss":"https://issuer.example","aud":"api","pad":")" + std::string(9000, 'x') + "\"}";
  EXPECT_EQ(check(hs(big)), JwtError::malformed);
  EXPECT_EQ(check(std::string(100000, 'A')), JwtError::malformed);
}

TEST_F(Jwt, DeeplyNestedJsonIsMalformedNotACrash) {
  std::string deep = R"({"iss":"https://issuer.example","aud":"api","x":)" +
                     std::string(2000, '[') + std::string(2000, ']') + "}";
  EXPECT_EQ(check(hs(deep)), JwtError::malformed);
}

// ------------------------------------------------------------------ the header value

TEST_F(Jwt, BearerPrefixHandling) {
  std::string token = hs();
  EXPECT_TRUE(verify_jwt("Bearer " + token, settings, kNow).ok());
  EXPECT_TRUE(verify_jwt("bearer " + token, settings, kNow).ok());
  EXPECT_TRUE(verify_jwt("BEARER   " + token + "  ", settings, kNow).ok());
  EXPECT_TRUE(verify_jwt(token, settings, kNow).ok());  // a bare token
  EXPECT_TRUE(verify_jwt("  " + token, settings, kNow).ok());
  EXPECT_EQ(verify_jwt("", settings, kNow).error, JwtError::missing);
  EXPECT_EQ(verify_jwt("   ", settings, kNow).error, JwtError::missing);
  EXPECT_EQ(verify_jwt("Bearer", settings, kNow).error, JwtError::missing);
  EXPECT_EQ(verify_jwt("Bearer   ", settings, kNow).error, JwtError::missing);
  EXPECT_EQ(verify_jwt("Basic dXNlcjpwYXNz", settings, kNow).error, JwtError::missing);
  EXPECT_EQ(verify_jwt("Bearer " + token + " extra", settings, kNow).error, JwtError::malformed);
  EXPECT_EQ(verify_jwt("Bearertoken", settings, kNow).error, JwtError::malformed);
}

TEST_F(Jwt, FailuresCarryNoClaims) {
  auto r = verify_jwt("Bearer " + flip_signature_byte(hs()), settings, kNow);
  EXPECT_FALSE(r.ok());
  EXPECT_TRUE(r.claims.empty());
}

TEST(JwtErrors, HaveNames) {
  EXPECT_STREQ(to_string(JwtError::none), "none");
  EXPECT_STREQ(to_string(JwtError::algorithm_not_allowed), "algorithm_not_allowed");
  EXPECT_STREQ(to_string(JwtError::wrong_audience), "wrong_audience");
}

// ------------------------------------------------------------------ claim_text

TEST(JwtClaimText, FormatsStringsIntegersAndBooleansOnly) {
  auto claims =
      boost::json::parse(
          R"({"s":"acme","e":"","i":42,"n":-7,"u":18446744073709551615,"t":true,"f":false,)"
          R"("d":1.5,"z":null,"a":["x"],"o":{"k":"v"}})")
          .as_object();
  EXPECT_EQ(claim_text(claims, "s"), "acme");
  EXPECT_EQ(claim_text(claims, "e"), "");
  EXPECT_EQ(claim_text(claims, "i"), "42");
  EXPECT_EQ(claim_text(claims, "n"), "-7");
  EXPECT_EQ(claim_text(claims, "u"), "18446744073709551615");
  EXPECT_EQ(claim_text(claims, "t"), "true");
  EXPECT_EQ(claim_text(claims, "f"), "false");
  EXPECT_EQ(claim_text(claims, "d"), std::nullopt);
  EXPECT_EQ(claim_text(claims, "z"), std::nullopt);
  EXPECT_EQ(claim_text(claims, "a"), std::nullopt);
  EXPECT_EQ(claim_text(claims, "o"), std::nullopt);
  EXPECT_EQ(claim_text(claims, "absent"), std::nullopt);
}

// ------------------------------------------------------------------ config: public keys

using floodgate::config::load_config_text;
using floodgate::config::LoadResult;

std::string config_with_keys(const std::vector<std::string>& files,
                             const std::string& algorithms = "[RS256, ES256]") {
  std::string yaml =
      "server:\n"
      "  listen: 0.0.0.0:8080\n"
      "upstreams:\n"
      "  origin: { url: \"http://127.0.0.1:9000\" }\n"
      "jwt:\n"
      "  algorithms: " +
      algorithms +
      "\n"
      "  public_keys:\n";
  for (const auto& f : files) yaml += "    - " + f + "\n";
  yaml +=
      "routes:\n"
      "  - name: default\n"
      "    match: { path_prefix: / }\n"
      "    upstream: origin\n";
  return yaml;
}

LoadResult load(const std::string& yaml) {
  return load_config_text(yaml, "jwt.yaml", [](const std::string&) -> std::optional<std::string> {
    return std::nullopt;
  });
}

std::string errors_of(const LoadResult& r) {
  std::string out;
  for (const auto& d : r.errors) out += "\n  " + d.to_string();
  return out;
}

// Warnings about the jwt section (others, such as a missing store.key_secret, are not ours).
std::size_t jwt_warnings(const LoadResult& r) {
  return static_cast<std::size_t>(
      std::count_if(r.warnings.begin(), r.warnings.end(),
                    [](const auto& w) { return w.message.rfind("jwt.", 0) == 0; }));
}

class JwtConfigKeys : public ::testing::Test {
 protected:
  void SetUp() override {
    dir =
        fs::temp_directory_path() /
        ("floodgate-jwt-test-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
         "-" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir);
  }
  void TearDown() override { fs::remove_all(dir); }

  std::string write(const std::string& name, const std::string& text) {
    auto p = dir / name;
    std::ofstream(p, std::ios::binary) << text;
    return p.string();
  }

  fs::path dir;
};

std::string example_key(const char* name) {
  return (fs::path(FLOODGATE_SOURCE_DIR) / "config/examples/keys" / name).string();
}

TEST_F(JwtConfigKeys, ShippedExampleKeysLoad) {
  auto r =
      load(config_with_keys({example_key("jwt-rs256.pub.pem"), example_key("jwt-es256.pub.pem")}));
  ASSERT_TRUE(r.errors.empty()) << errors_of(r);
  ASSERT_NE(r.config, nullptr);
  const auto& j = *r.config->jwt;
  ASSERT_EQ(j.keys.size(), 2u);
  EXPECT_EQ(EVP_PKEY_is_a(j.keys[0].get(), "RSA"), 1);
  EXPECT_EQ(EVP_PKEY_is_a(j.keys[1].get(), "EC"), 1);
  EXPECT_EQ(jwt_warnings(r), 0u);
}

TEST_F(JwtConfigKeys, MissingFileIsReportedAtItsEntry) {
  std::string good = example_key("jwt-rs256.pub.pem");
  std::string missing = (dir / "no-such-key.pem").string();
  auto r = load(config_with_keys({good, missing}));
  ASSERT_EQ(r.config, nullptr);
  ASSERT_EQ(r.errors.size(), 1u) << errors_of(r);
  const auto& d = r.errors[0];
  EXPECT_EQ(d.line, 9);  // the second "- ..." under public_keys
  EXPECT_EQ(d.column, 7);
  EXPECT_NE(d.message.find("jwt.public_keys: cannot read public key from " + missing + ": "),
            std::string::npos)
      << d.message;
  EXPECT_NE(d.message.find("No such file"), std::string::npos) << d.message;
}

TEST_F(JwtConfigKeys, FlowSequenceEntriesAreReportedAtTheirColumn) {
  std::string yaml = config_with_keys({});
  std::string missing = (dir / "gone.pem").string();
  yaml.replace(yaml.find("  public_keys:\n"), 15,
               "  public_keys: [" + example_key("jwt-es256.pub.pem") + ", " + missing + "]\n");
  auto r = load(yaml);
  ASSERT_EQ(r.errors.size(), 1u) << errors_of(r);
  EXPECT_EQ(r.errors[0].line, 7);
  EXPECT_EQ(r.errors[0].column, static_cast<int>(std::string("  public_keys: [").size() +
                                                 example_key("jwt-es256.pub.pem").size() + 2 + 1));
}

TEST_F(JwtConfigKeys, PrivateKeysGarbageAndWeakKeysAreRefused) {
  Key rsa = rsa_key();
  std::unique_ptr<BIO, int (*)(BIO*)> bio(BIO_new(BIO_s_mem()), &BIO_free);
  ASSERT_EQ(PEM_write_bio_PrivateKey(bio.get(), rsa.get(), nullptr, nullptr, 0, nullptr, nullptr),
            1);
  char* data = nullptr;
  long n = BIO_get_mem_data(bio.get(), &data);
  std::string priv = write("private.pem", std::string(data, static_cast<std::size_t>(n)));
  std::string garbage = write("garbage.pem", "hello\n");
  std::string broken =
      write("broken.pem", "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n");
  std::string weak = write("weak.pem", public_pem(rsa_key(1024)));
  std::string p384 = write("p384.pem", public_pem(ec_key("P-384")));
  auto r = load(config_with_keys({priv, garbage, broken, weak, p384}));
  ASSERT_EQ(r.errors.size(), 5u) << errors_of(r);
  for (std::size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(r.errors[i].line, static_cast<int>(8 + i)) << r.errors[i].to_string();
    EXPECT_NE(r.errors[i].message.find("cannot read public key from"), std::string::npos);
  }
  EXPECT_NE(r.errors[0].message.find("private key"), std::string::npos) << r.errors[0].message;
  EXPECT_NE(r.errors[3].message.find("1024 bits"), std::string::npos) << r.errors[3].message;
  EXPECT_NE(r.errors[4].message.find("P-256"), std::string::npos) << r.errors[4].message;
}

TEST_F(JwtConfigKeys, CertificateIsAcceptedForItsPublicKey) {
  Key ec = ec_key();
  std::unique_ptr<X509, void (*)(X509*)> cert(X509_new(), &X509_free);
  ASSERT_TRUE(cert);
  X509_set_version(cert.get(), 2);
  ASN1_INTEGER_set(X509_get_serialNumber(cert.get()), 1);
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), 0);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), 3600);
  X509_NAME_add_entry_by_txt(X509_get_subject_name(cert.get()), "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>("issuer.example"), -1, -1, 0);
  X509_set_issuer_name(cert.get(), X509_get_subject_name(cert.get()));
  X509_set_pubkey(cert.get(), ec.get());
  ASSERT_GT(X509_sign(cert.get(), ec.get(), EVP_sha256()), 0);
  std::unique_ptr<BIO, int (*)(BIO*)> bio(BIO_new(BIO_s_mem()), &BIO_free);
  ASSERT_EQ(PEM_write_bio_X509(bio.get(), cert.get()), 1);
  char* data = nullptr;
  long n = BIO_get_mem_data(bio.get(), &data);
  std::string file = write("cert.pem", std::string(data, static_cast<std::size_t>(n)));

  auto r = load(config_with_keys({file}, "[ES256]"));
  ASSERT_TRUE(r.errors.empty()) << errors_of(r);
  JwtSettings s = *r.config->jwt;
  ASSERT_EQ(s.keys.size(), 1u);
  std::string token = sign("ES256", header_for("ES256"), R"({"tenant":"t"})", ec);
  EXPECT_TRUE(verify_jwt("Bearer " + token, s, kNow).ok());
}

TEST_F(JwtConfigKeys, AnAllowedAlgorithmWithoutAKeyOfItsKindIsWarnedAbout) {
  auto r = load(config_with_keys({example_key("jwt-es256.pub.pem")}));
  ASSERT_TRUE(r.errors.empty()) << errors_of(r);
  ASSERT_EQ(jwt_warnings(r), 1u);
  for (const auto& w : r.warnings) {
    if (w.message.rfind("jwt.", 0) == 0) {
      EXPECT_NE(w.message.find("no RSA key"), std::string::npos) << w.message;
    }
  }
}

}  // namespace
