#pragma once
// An identity provider for the jwt.jwks tests: jwks_server.py serving a key set over HTTPS
// with a certificate of the test CA, from a directory of its own. What it publishes, whether
// it is down, and how often it was asked are files there.

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "harness.hpp"
#include "test_pki.hpp"

namespace floodgate::testing {

class IdentityProvider {
 public:
  explicit IdentityProvider(TestPki& pki)
      : dir_(std::filesystem::temp_directory_path() /
             ("floodgate-jwks-" + std::to_string(::getpid()) + "-" + std::to_string(counter_++))),
        files_((std::filesystem::create_directories(dir_), pki.issue("localhost", {"localhost"}))),
        process_({"/usr/bin/python3", FLOODGATE_SOURCE_DIR "/tests/integration/jwks_server.py",
                  dir_.string(), files_.cert, files_.key}) {
    using namespace std::chrono_literals;
    auto line = process_.read_line(20s);
    port_ = line.empty() ? 0 : static_cast<std::uint16_t>(std::stoi(line));
    if (port_ == 0) ADD_FAILURE() << "the JWKS server did not start";
  }
  ~IdentityProvider() { std::filesystem::remove_all(dir_); }
  IdentityProvider(const IdentityProvider&) = delete;
  IdentityProvider& operator=(const IdentityProvider&) = delete;

  // `{"keys": [JWKS...]}`, replaced whole (a fetch never reads half a set).
  void publish(const std::vector<std::string>& jwks) {
    std::string json = R"({"keys":[)";
    for (std::size_t i = 0; i < jwks.size(); ++i) json += (i ? "," : "") + jwks[i];
    std::ofstream(dir_ / "jwks.json.tmp") << json << "]}";
    std::filesystem::rename(dir_ / "jwks.json.tmp", dir_ / "jwks.json");
  }
  void down(bool is_down) {
    if (is_down)
      std::ofstream(dir_ / "down") << "down";
    else
      std::filesystem::remove(dir_ / "down");
  }
  std::size_t hits() const {
    std::ifstream in(dir_ / "hits");
    std::size_t n = 0;
    for (std::string line; std::getline(in, line);) ++n;
    return n;
  }
  std::string url() const {
    return "https://localhost:" + std::to_string(port_) + "/.well-known/jwks.json";
  }

 private:
  static inline int counter_ = 0;
  std::filesystem::path dir_;
  TestPki::Files files_;
  ChildProcess process_;
  std::uint16_t port_ = 0;
};

}  // namespace floodgate::testing
