#include "redis_cluster.hpp"

#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <thread>

#include "redis_server.hpp"

namespace floodgate::testing {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

RedisCluster::RedisCluster() {
  static int counter = 0;
  dir_ = fs::temp_directory_path() /
         ("floodgate-cluster-" + std::to_string(getpid()) + "-" + std::to_string(++counter));
  fs::create_directories(dir_);
  ports_.resize(6);
  nodes_.resize(6);
  for (std::size_t i = 0; i < 6; ++i) start_node(i);
  for (std::size_t i = 0; i < 6; ++i) {
    // A port another process took between free_port and the bind: the node exits at once
    // ("Address already in use"); it gets new ports, twice at most.
    for (int attempt = 0;; ++attempt) {
      for (int t = 0; t < 200 && cli(ports_[i], "PING") != "PONG"; ++t)
        std::this_thread::sleep_for(20ms);
      if (cli(ports_[i], "PING") == "PONG") break;
      std::ifstream log(dir_ / std::to_string(ports_[i]) / "redis.log");
      std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
      if (attempt == 2)
        throw std::runtime_error("cluster node " + std::to_string(ports_[i]) +
                                 " did not start; its log:\n" + text);
      start_node(i);
    }
  }
  std::string create = "--cluster create";
  for (auto port : ports_) create += " 127.0.0.1:" + std::to_string(port);
  create += " --cluster-replicas 1 --cluster-yes";
  cli(ports_[0], create);
  if (!wait_ok(20s)) throw std::runtime_error("the Redis cluster did not come up");
  if (!wait_replicas_known(20s))
    throw std::runtime_error("the Redis cluster's replicas were not known:\n" + describe());
}

void RedisCluster::start_node(std::size_t i) {
  nodes_[i].reset();
  const auto port = free_port();
  // The bus port is named explicitly: the default (port + 10000) may be taken or past 65535.
  const auto bus = free_port();
  ports_[i] = port;
  auto node_dir = dir_ / std::to_string(port);
  fs::create_directories(node_dir);
  nodes_[i] = std::make_unique<ChildProcess>(std::vector<std::string>{
      "/usr/bin/redis-server", "--port", std::to_string(port), "--cluster-port",
      std::to_string(bus), "--bind", "127.0.0.1", "--cluster-enabled", "yes",
      "--cluster-config-file", (node_dir / "nodes.conf").string(), "--cluster-node-timeout", "1000",
      // A replica just created may not have synced yet: let it take over all the same.
      "--cluster-replica-validity-factor", "0", "--save", "", "--appendonly", "no", "--dir",
      node_dir.string(), "--logfile", (node_dir / "redis.log").string()});
}

bool RedisCluster::wait_replicas_known(std::chrono::milliseconds limit) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    bool known = true;
    for (std::size_t i = 0; i < ports_.size() && known; ++i) {
      if (!nodes_[i]) continue;
      auto nodes = cli(ports_[i], "CLUSTER NODES");
      std::size_t replicas = 0;
      for (std::size_t at = nodes.find(" slave "); at != std::string::npos;
           at = nodes.find(" slave ", at + 1))
        ++replicas;
      // "myself,slave" is one too.
      for (std::size_t at = nodes.find(",slave "); at != std::string::npos;
           at = nodes.find(",slave ", at + 1))
        ++replicas;
      known = replicas == 3;
    }
    if (known) return true;
    std::this_thread::sleep_for(100ms);
  }
  return false;
}

std::string RedisCluster::describe() const {
  std::string out;
  for (std::size_t i = 0; i < ports_.size(); ++i) {
    if (!nodes_[i]) continue;
    if (out.empty())
      out = "CLUSTER NODES seen by " + std::to_string(ports_[i]) + ":\n" +
            cli(ports_[i], "CLUSTER NODES") + "\n";
    if (cli(ports_[i], "ROLE").rfind("slave", 0) != 0) continue;
    std::ifstream log(dir_ / std::to_string(ports_[i]) / "redis.log");
    std::vector<std::string> lines;
    for (std::string line; std::getline(log, line);) lines.push_back(line);
    out += "replica " + std::to_string(ports_[i]) + " log tail:\n";
    for (auto j = lines.size() > 15 ? lines.size() - 15 : 0; j < lines.size(); ++j)
      out += "  " + lines[j] + "\n";
  }
  return out;
}

RedisCluster::~RedisCluster() {
  nodes_.clear();
  std::error_code ignored;
  fs::remove_all(dir_, ignored);
}

std::string RedisCluster::cli(std::uint16_t port, const std::string& args) const {
  return redis_cli(port, args, 20);  // cluster commands (CREATE, failover) take seconds
}

std::vector<std::uint16_t> RedisCluster::masters() const {
  std::vector<std::uint16_t> out;
  for (std::size_t i = 0; i < ports_.size(); ++i)
    if (nodes_[i] && cli(ports_[i], "ROLE").rfind("master", 0) == 0) out.push_back(ports_[i]);
  return out;
}

void RedisCluster::kill(std::uint16_t port) {
  for (std::size_t i = 0; i < ports_.size(); ++i)
    if (ports_[i] == port && nodes_[i]) {
      nodes_[i]->signal_and_wait(SIGKILL, 5s);
      nodes_[i].reset();
    }
}

bool RedisCluster::wait_ok(std::chrono::milliseconds limit) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    bool ok = true;
    for (std::size_t i = 0; i < ports_.size() && ok; ++i)
      if (nodes_[i])
        ok = cli(ports_[i], "CLUSTER INFO").find("cluster_state:ok") != std::string::npos;
    if (ok) return true;
    std::this_thread::sleep_for(100ms);
  }
  return false;
}

bool RedisCluster::wait_failover(std::chrono::milliseconds limit) {
  auto start = std::chrono::steady_clock::now();
  bool pushed = false;
  while (std::chrono::steady_clock::now() - start < limit) {
    if (masters().size() == 3 && wait_ok(std::chrono::milliseconds(1))) return true;
    if (!pushed && std::chrono::steady_clock::now() - start > limit / 2) {
      pushed = true;
      for (std::size_t i = 0; i < ports_.size(); ++i) {
        if (!nodes_[i] || cli(ports_[i], "ROLE").rfind("slave", 0) != 0) continue;
        // ROLE of a replica: slave, master host, master port, link state, offset.
        auto role = cli(ports_[i], "ROLE");
        auto port_at = role.find('\n', role.find('\n') + 1);
        auto master = role.substr(port_at + 1, role.find('\n', port_at + 1) - port_at - 1);
        for (std::size_t k = 0; k < ports_.size(); ++k)
          if (!nodes_[k] && std::to_string(ports_[k]) == master) {
            std::fprintf(stderr, "no election after %lld ms; replica %u takes over\n",
                         static_cast<long long>(limit.count() / 2), ports_[i]);
            cli(ports_[i], "CLUSTER FAILOVER TAKEOVER");
          }
      }
    }
    std::this_thread::sleep_for(100ms);
  }
  return false;
}

std::string cluster_config(std::uint16_t listen, std::uint16_t origin, const RedisCluster& cluster,
                           const std::string& routes, const std::string& timeout) {
  std::string nodes;
  for (auto p : cluster.ports())
    nodes += (nodes.empty() ? "" : ", ") + ("\"127.0.0.1:" + std::to_string(p) + "\"");
  return "server:\n  listen: [127.0.0.1:" + std::to_string(listen) +
         "]\n  threads: 2\n  timeouts: { drain: 1s }\n" +
         "upstreams:\n  origin: { url: \"http://127.0.0.1:" + std::to_string(origin) + "\" }\n" +
         "store:\n  backend: redis_cluster\n  redis: { nodes: [" + nodes +
         "], timeout: " + timeout + " }\n" +
         "  key_secret: cluster-test-secret-0123456789\n  instances: 2\nroutes:\n" + routes;
}

}  // namespace floodgate::testing
