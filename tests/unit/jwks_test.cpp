// JWK Sets (jwt.jwks): keys read from their JSON parameters, chosen by a token's kid, with
// EdDSA beside RS256 and ES256; what a set cannot use is skipped, never guessed at.
#include <gtest/gtest.h>

#include <string>

#include "../support/jwt_signing.hpp"
#include "floodgate/keys/jwks.hpp"
#include "floodgate/keys/jwt.hpp"

namespace floodgate::keys {
namespace {

using namespace floodgate::testing;
using config::JwtAlgorithm;

constexpr std::int64_t kNow = 1'700'000'000;
const std::string kClaims = R"({"sub":"u1","tenant":"acme","exp":1700000600})";

KeySet parsed(const std::string& json) {
  auto r = parse_jwks(json);
  if (auto* error = std::get_if<std::string>(&r)) {
    ADD_FAILURE() << *error;
    return {};
  }
  return std::get<KeySet>(std::move(r));
}

struct Jwks : ::testing::Test {
  static void SetUpTestSuite() {
    rsa = new Key(rsa_key());
    ec = new Key(ec_key());
    ed = new Key(ed25519_key());
    other = new Key(rsa_key());
  }
  static void TearDownTestSuite() {
    delete rsa;
    delete ec;
    delete ed;
    delete other;
  }
  static Key *rsa, *ec, *ed, *other;

  config::JwtSettings settings() const {
    config::JwtSettings s;
    s.algorithms = {JwtAlgorithm::rs256, JwtAlgorithm::es256, JwtAlgorithm::eddsa};
    return s;
  }
  std::string set_json() const {
    return R"({"keys":[)" + jwk_of(*rsa, "rsa-1") + "," + jwk_of(*ec, "ec-1") + "," +
           jwk_of(*ed, "ed-1") + "]}";
  }
};
Key *Jwks::rsa, *Jwks::ec, *Jwks::ed, *Jwks::other;

TEST_F(Jwks, ReadsRsaEcAndEd25519KeysWithTheirKids) {
  auto set = parsed(set_json());
  ASSERT_EQ(set.keys.size(), 3u);
  EXPECT_EQ(set.keys[0].kid, "rsa-1");
  EXPECT_EQ(set.keys[1].kid, "ec-1");
  EXPECT_EQ(set.keys[2].kid, "ed-1");
  EXPECT_EQ(set.skipped, 0u);
}

TEST_F(Jwks, ATokenIsCheckedWithTheKeyItsKidNames) {
  const auto set = parsed(set_json());
  const auto s = settings();
  auto check = [&](const std::string& token) {
    return verify_jwt("Bearer " + token, s, kNow, &set).error;
  };
  EXPECT_EQ(check(sign("RS256", header_with_kid("RS256", "rsa-1"), kClaims, *rsa)), JwtError::none);
  EXPECT_EQ(check(sign("ES256", header_with_kid("ES256", "ec-1"), kClaims, *ec)), JwtError::none);
  EXPECT_EQ(check(sign("EdDSA", header_with_kid("EdDSA", "ed-1"), kClaims, *ed)), JwtError::none);
  // Signed by another key under a known kid: a bad signature.
  EXPECT_EQ(check(sign("RS256", header_with_kid("RS256", "rsa-1"), kClaims, *other)),
            JwtError::bad_signature);
  // A kid the set does not have: the issuer may have rotated (the refresher is asked).
  EXPECT_EQ(check(sign("RS256", header_with_kid("RS256", "rsa-2"), kClaims, *other)),
            JwtError::unknown_key);
  // The right key under another kind's kid is not tried: an RSA token names an EC key.
  EXPECT_EQ(check(sign("RS256", header_with_kid("RS256", "ec-1"), kClaims, *rsa)),
            JwtError::bad_signature);
  // No kid: the set's keys of the algorithm's kind are tried (the first max_kidless_tries).
  EXPECT_EQ(check(sign("EdDSA", R"({"alg":"EdDSA"})", kClaims, *ed)), JwtError::none);
  // No set (none fetched yet) and no PEM keys: nothing verifies.
  EXPECT_EQ(verify_jwt("Bearer " + sign("RS256", header_with_kid("RS256", "rsa-1"), kClaims, *rsa),
                       s, kNow, nullptr)
                .error,
            JwtError::bad_signature);
}

TEST_F(Jwks, EdDsaMustBeAllowedLikeAnyAlgorithm) {
  const auto set = parsed(set_json());
  auto s = settings();
  s.algorithms = {JwtAlgorithm::rs256};
  EXPECT_EQ(verify_jwt("Bearer " + sign("EdDSA", header_with_kid("EdDSA", "ed-1"), kClaims, *ed), s,
                       kNow, &set)
                .error,
            JwtError::algorithm_not_allowed);
}

TEST_F(Jwks, EntriesItCannotUseAreSkippedAndASetWithoutAnyIsRefused) {
  const auto weak = rsa_key(1024);
  auto set = parsed(R"({"keys":[)" + jwk_of(*ec, "ec-1") +
                    R"(,{"kid":"enc","use":"enc","kty":"RSA","n":"AQAB","e":"AQAB"},)"
                    R"({"kid":"secret","kty":"oct","k":"c2VjcmV0"},)"
                    R"({"kid":"p384","kty":"EC","crv":"P-384","x":"AA","y":"AA"},)" +
                    jwk_of(weak, "weak") + R"(,"not an object"]})");
  ASSERT_EQ(set.keys.size(), 1u);
  EXPECT_EQ(set.keys[0].kid, "ec-1");
  EXPECT_EQ(set.skipped, 5u);
  // A point that is not on P-256 (x and y from the key, y changed) is not a key.
  auto bad_point = jwk_of(*ec, "bent");
  auto y = bad_point.find(R"("y":")") + 5;
  bad_point[y] = bad_point[y] == 'A' ? 'B' : 'A';
  EXPECT_TRUE(std::holds_alternative<std::string>(parse_jwks(R"({"keys":[)" + bad_point + "]}")));
  for (const char* bad : {"", "[]", "{}", R"({"keys":{}})", R"({"keys":[]})", "{\"keys\":["}) {
    EXPECT_TRUE(std::holds_alternative<std::string>(parse_jwks(bad))) << bad;
  }
}

// Issue 34 item 11: a set of thousands of keys cost seconds of CPU per fetch. Only the first
// max_jwks_keys signature key entries are parsed: the rest are counted, never parsed (an
// invalid one past the bound is "dropped", not "skipped" as a parsed one would be).
TEST_F(Jwks, OnlyTheFirst64SignatureKeysAreRead) {
  std::string json = R"({"keys":[{"kid":"enc","use":"enc","kty":"RSA","n":"AQAB","e":"AQAB"})";
  for (std::size_t i = 0; i < max_jwks_keys + 5; ++i) json += "," + jwk_of(*ec, std::to_string(i));
  json += R"(,{"kid":"bad","kty":"EC","crv":"P-256","x":"AA","y":"AA"}]})";
  const auto set = parsed(json);
  ASSERT_EQ(set.keys.size(), max_jwks_keys);
  EXPECT_EQ(set.keys.front().kid, "0");
  EXPECT_EQ(set.keys.back().kid, std::to_string(max_jwks_keys - 1));
  EXPECT_EQ(set.skipped, 1u);  // the encryption key: not a signature key, not counted
  EXPECT_EQ(set.dropped, 6u);
  // Past the bound even a good key is ignored: its tokens are refused.
  auto s = settings();
  EXPECT_EQ(verify_jwt("Bearer " + sign("ES256", header_with_kid("ES256", "64"), kClaims, *ec), s,
                       kNow, &set)
                .error,
            JwtError::unknown_key);
}

// A token without a kid is checked with the first max_kidless_tries keys of its algorithm's
// kind, not with every key: a forged one costs at most that many verifications.
TEST_F(Jwks, ATokenWithoutAKidTriesOnlyTheFirstFourKeysOfItsKind) {
  static_assert(max_kidless_tries == 4);
  const auto s = settings();
  const auto kidless = sign("RS256", R"({"alg":"RS256"})", kClaims, *rsa);
  auto check = [&](const std::vector<const Key*>& keys) {
    std::string json = R"({"keys":[)";
    for (std::size_t i = 0; i < keys.size(); ++i)
      json += (i ? "," : "") + jwk_of(*keys[i], "k" + std::to_string(i));
    const auto set = parsed(json + "]}");
    return verify_jwt("Bearer " + kidless, s, kNow, &set).error;
  };
  // The signer is the fourth RSA key: found (keys of other kinds do not count).
  EXPECT_EQ(check({ec, ed, other, other, other, rsa}), JwtError::none);
  // The fifth: never tried.
  EXPECT_EQ(check({other, other, other, other, rsa}), JwtError::bad_signature);
  // Named by its kid, any key of the set is found.
  std::string json = R"({"keys":[)";
  for (int i = 0; i < 10; ++i) json += jwk_of(*other, "k" + std::to_string(i)) + ",";
  const auto set = parsed(json + jwk_of(*rsa, "signer") + "]}");
  EXPECT_EQ(verify_jwt("Bearer " + sign("RS256", header_with_kid("RS256", "signer"), kClaims, *rsa),
                       s, kNow, &set)
                .error,
            JwtError::none);
}

TEST(JwksCell, HoldsTheLatestSetAndOneRefreshRequest) {
  JwksCell cell;
  EXPECT_EQ(cell.get(), nullptr);
  auto set = std::make_shared<const KeySet>();
  cell.set(set);
  EXPECT_EQ(cell.get(), set);
  EXPECT_FALSE(cell.take_refresh_request());
  cell.ask_refresh();
  cell.ask_refresh();
  EXPECT_TRUE(cell.take_refresh_request());
  EXPECT_FALSE(cell.take_refresh_request());
}

}  // namespace
}  // namespace floodgate::keys
