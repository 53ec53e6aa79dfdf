#pragma once
// A real redis-server for one test: its own temp dir, a free loopback port, no persistence.
// Faults are real too: kill it, freeze it (SIGSTOP), thaw it, start it again on the same port.

#include <csignal>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "harness.hpp"
#include "test_pki.hpp"

namespace floodgate::testing {

// `redis-cli -p PORT ARGS` bounded by `timeout_seconds`; its output without trailing newlines.
std::string redis_cli(std::uint16_t port, const std::string& args, int timeout_seconds);

// A TLS-only server (`--port 0 --tls-port P`): its certificate chain and key, the CA its
// clients' certificates are checked against, and whether it asks for one ("yes", "no",
// "optional"). redis-cli talks to it with the same certificate as a client.
struct RedisTlsFiles {
  std::string ca_file;
  std::string chain;
  std::string key;
  std::string auth_clients = "yes";
};

class RedisServer {
 public:
  RedisServer();
  explicit RedisServer(RedisTlsFiles tls);
  ~RedisServer();
  std::uint16_t port() const { return port_; }
  void kill();     // SIGKILL: connections drop
  void freeze();   // SIGSTOP: connections stay, nothing answers
  void thaw();     // SIGCONT
  void restart();  // kill (if running) and start again on the same port, empty
  // Runs a command through redis-cli and returns its output (trimmed).
  std::string cli(const std::string& args) const;

 private:
  explicit RedisServer(std::optional<RedisTlsFiles> tls);
  void start();
  std::filesystem::path dir_;
  std::uint16_t port_ = 0;
  std::optional<RedisTlsFiles> tls_;
  std::unique_ptr<ChildProcess> process_;
};

// A TLS-only redis-server with certificates of its own test PKI: by default its certificate
// names localhost and 127.0.0.1 and it requires a client certificate, which `tls_yaml` gives
// floodgate (`store.redis.tls`).
struct TlsRedis {
  struct Options {
    std::vector<std::string> dns{"localhost"};  // the server certificate's names
    std::vector<std::string> ips{"127.0.0.1"};
    bool self_signed = false;  // a certificate the PKI's CA does not vouch for
    std::string auth_clients = "yes";
  };
  TlsRedis() : TlsRedis(Options{}) {}
  explicit TlsRedis(const Options& o);
  // `{ ca_file: ..., cert: ..., key: ... }` (without the client certificate when `client` is
  // false), with `more` (", server_name: x") inside the braces.
  std::string tls_yaml(bool client = true, const std::string& more = "") const;

  TestPki pki;
  TestPki::Files server_files;
  TestPki::Files client_files;
  RedisServer redis;
};

// A redis-cli command printing the three numbers of a token_bucket, gcra, sliding_window or
// fixed_window key's state (lua/prelude.lua packs them), one per line; nothing without a key.
std::string state_command(const std::string& key);

// A port that was free a moment ago (bound, then released), below the ephemeral range.
std::uint16_t free_port();

}  // namespace floodgate::testing
