#pragma once
// Certificates made at test time with OpenSSL's C API, so that no key material is checked in
// and validity windows are relative to the run (an expired certificate stays expired, a valid
// one never expires under a test). Everything lives in a temporary directory that goes away
// with the object.

#include <chrono>
#include <string>
#include <vector>

namespace floodgate::testing {

class TestPki {
 public:
  // PEM file paths. `chain` is the leaf followed by the CA, for servers that send the chain.
  struct Files {
    std::string cert;
    std::string key;
    std::string chain;
  };

  // A fresh CA: EC P-256, self-signed, CA:TRUE, valid from a day ago for ten years.
  TestPki();
  ~TestPki();
  TestPki(const TestPki&) = delete;
  TestPki& operator=(const TestPki&) = delete;

  const std::string& dir() const { return dir_; }
  const std::string& ca_file() const { return ca_.cert; }

  // A server leaf (EC P-256) signed by this CA. The validity window is given as offsets from
  // now, so (-240h, -24h) makes a certificate that expired yesterday.
  Files issue(const std::string& cn, const std::vector<std::string>& dns,
              const std::vector<std::string>& ips = {},
              std::chrono::hours not_before = std::chrono::hours(-24),
              std::chrono::hours not_after = std::chrono::hours(24 * 30));

  // A leaf that signs itself: no CA anyone trusts vouches for it. `chain` equals `cert`.
  Files self_signed(const std::string& cn, const std::vector<std::string>& dns,
                    const std::vector<std::string>& ips = {});

 private:
  std::string dir_;
  Files ca_;
  int issued_ = 0;  // numbers the files, so that the same CN can be issued twice
};

}  // namespace floodgate::testing
