#include "redis_server.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <mutex>
#include <random>
#include <set>
#include <thread>

namespace floodgate::testing {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

std::uint16_t free_port() {
  // Below Linux's ephemeral range (32768-60999): a port the kernel hands out for bind(0) or
  // as an outgoing connection's local port can be taken again before the server meant to
  // listen on it binds it, and tests running side by side open thousands of connections
  // (a cluster node that could not bind its port was a CI failure).
  // Nor twice in one process: a port handed out is free until its server starts, and a Redis
  // Cluster node's port was once drawn again as another node's bus port meanwhile.
  static std::mutex mutex;
  static std::set<std::uint16_t> given;
  std::lock_guard lock(mutex);
  thread_local std::mt19937 pick(std::random_device{}());
  asio::io_context ioc;
  for (int i = 0; i < 200; ++i) {
    const auto port = static_cast<std::uint16_t>(20000 + pick() % 12768);
    if (!given.insert(port).second) continue;
    tcp::acceptor a(ioc);
    boost::system::error_code ec;
    a.open(tcp::v4(), ec);
    if (!ec) a.bind(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port), ec);
    if (!ec) return port;
  }
  tcp::acceptor a(ioc, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  return a.local_endpoint().port();
}

RedisServer::RedisServer() : RedisServer(std::optional<RedisTlsFiles>()) {}

RedisServer::RedisServer(RedisTlsFiles tls) : RedisServer(std::optional<RedisTlsFiles>(tls)) {}

RedisServer::RedisServer(std::optional<RedisTlsFiles> tls) : tls_(std::move(tls)) {
  static int counter = 0;
  dir_ = fs::temp_directory_path() /
         ("floodgate-redis-" + std::to_string(getpid()) + "-" + std::to_string(++counter));
  fs::create_directories(dir_);
  port_ = free_port();
  start();
}

RedisServer::~RedisServer() {
  if (process_) thaw();
  process_.reset();
  std::error_code ignored;
  fs::remove_all(dir_, ignored);
}

std::string RedisServer::cli(const std::string& args) const {
  if (!tls_) return redis_cli(port_, args, 2);
  // --insecure: the test's own look at the server, whichever certificate it was given.
  return command_output("redis-cli --tls --insecure --cert " + tls_->chain + " --key " + tls_->key +
                            " -p " + std::to_string(port_) + " " + args,
                        2);
}

void RedisServer::start() {
  std::vector<std::string> argv{"/usr/bin/redis-server",
                                "--bind",
                                "127.0.0.1",
                                "--save",
                                "",
                                "--appendonly",
                                "no",
                                "--dir",
                                dir_.string(),
                                "--logfile",
                                (dir_ / "redis.log").string()};
  if (tls_) {
    for (const auto& a : {"--port", "0", "--tls-port"}) argv.emplace_back(a);
    argv.insert(argv.end(),
                {std::to_string(port_), "--tls-cert-file", tls_->chain, "--tls-key-file", tls_->key,
                 "--tls-ca-cert-file", tls_->ca_file, "--tls-auth-clients", tls_->auth_clients});
  } else {
    argv.insert(argv.end(), {"--port", std::to_string(port_)});
  }
  process_ = std::make_unique<ChildProcess>(argv);
  for (int i = 0; i < 200; ++i) {
    if (cli("PING") == "PONG") return;
    std::this_thread::sleep_for(20ms);
  }
  throw std::runtime_error("redis-server did not start on port " + std::to_string(port_));
}

void RedisServer::kill() {
  if (!process_) return;
  ::kill(process_->pid(), SIGCONT);
  process_->signal_and_wait(SIGKILL, 5s);
  process_.reset();
}

void RedisServer::freeze() {
  if (process_) ::kill(process_->pid(), SIGSTOP);
}

void RedisServer::thaw() {
  if (process_) ::kill(process_->pid(), SIGCONT);
}

void RedisServer::restart() {
  kill();
  start();
}

TlsRedis::TlsRedis(const Options& o)
    : server_files(o.self_signed ? pki.self_signed("redis", o.dns, o.ips)
                                 : pki.issue("redis", o.dns, o.ips)),
      client_files(pki.issue("floodgate", {"floodgate"})),
      redis(RedisTlsFiles{pki.ca_file(), server_files.chain, server_files.key, o.auth_clients}) {}

std::string TlsRedis::tls_yaml(bool client, const std::string& more) const {
  std::string out = "{ ca_file: " + pki.ca_file();
  if (client) out += ", cert: " + client_files.chain + ", key: " + client_files.key;
  return out + more + " }";
}

std::string redis_cli(std::uint16_t port, const std::string& args, int timeout_seconds) {
  return command_output("redis-cli -p " + std::to_string(port) + " " + args, timeout_seconds);
}

std::string state_command(const std::string& key) {
  return "EVAL \"local v = redis.call('GET', KEYS[1]) if not v then return {} end "
         "local _, a, b, c = struct.unpack('<Bdddd', v) local f = string.format "
         "return {f('%.17g', a), f('%.17g', b), f('%.17g', c)}\" 1 '" +
         key + "'";
}

}  // namespace floodgate::testing
