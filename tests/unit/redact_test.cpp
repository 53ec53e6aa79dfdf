// Issue 34 item 10: a JWKS url's query may carry the issuer's API key, and a url's userinfo a
// password; what /config, the log and config errors show of a url has neither.
#include <gtest/gtest.h>

#include "floodgate/config/redact.hpp"

namespace {

using floodgate::config::redacted_url;

TEST(RedactedUrl, HidesQueryValuesUserinfoAndFragmentKeepingTheRest) {
  EXPECT_EQ(redacted_url("https://idp.example:8443/.well-known/jwks.json"),
            "https://idp.example:8443/.well-known/jwks.json");
  EXPECT_EQ(redacted_url("https://idp.example/jwks?api_key=SECRET&v=2"),
            "https://idp.example/jwks?api_key=***&v=***");
  // A bare parameter may be the secret itself.
  EXPECT_EQ(redacted_url("https://idp.example/jwks?SECRET"), "https://idp.example/jwks?***");
  EXPECT_EQ(redacted_url("https://user:PASS@idp.example/jwks#SECRET"),
            "https://***@idp.example/jwks#***");
  EXPECT_EQ(redacted_url("https://[::1]:9443/k?a=SECRET"), "https://[::1]:9443/k?a=***");
}

TEST(RedactedUrl, TextThatIsNotAUrlIsHiddenUpToItsLastAtAndFromItsQuery) {
  // Spaces do not parse; a password may hold '/', '?' or '@'.
  EXPECT_EQ(redacted_url("https://us er:PA/S@S@idp.example/jwks?k=SECRET"),
            "https://***@idp.example/jwks?***");
  EXPECT_EQ(redacted_url("not a url?key=SECRET"), "not a url?***");
  EXPECT_EQ(redacted_url("ftp ://h/#SECRET"), "ftp ://h/#***");
}

}  // namespace
