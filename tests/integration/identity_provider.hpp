#pragma once
// An identity provider for the jwt.jwks tests: https_files.py serving a key set over HTTPS
// with a certificate of the test CA.

#include <string>
#include <vector>

#include "https_files.hpp"

namespace floodgate::testing {

class IdentityProvider {
 public:
  explicit IdentityProvider(TestPki& pki) : files_(pki) {}

  // `{"keys": [JWKS...]}`, replaced whole (a fetch never reads half a set).
  void publish(const std::vector<std::string>& jwks) {
    std::string json = R"({"keys":[)";
    for (std::size_t i = 0; i < jwks.size(); ++i) json += (i ? "," : "") + jwks[i];
    files_.publish("jwks.json", json + "]}");
  }
  void down(bool is_down) { files_.down(is_down); }
  std::size_t hits() const { return files_.hits(); }
  std::string url() const { return files_.url("/.well-known/jwks.json"); }

 private:
  HttpsFiles files_;
};

}  // namespace floodgate::testing
