#include "redis_sentinel.hpp"

#include <unistd.h>

#include <charconv>
#include <csignal>
#include <fstream>
#include <map>
#include <stdexcept>
#include <thread>

#include "redis_server.hpp"

namespace floodgate::testing {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

namespace {

bool wait_until(const std::function<bool()>& ok, std::chrono::milliseconds limit) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < until) {
    if (ok()) return true;
    std::this_thread::sleep_for(50ms);
  }
  return ok();
}

std::size_t count_lines(const std::string& text, const std::string& line) {
  std::size_t n = 0;
  for (std::size_t at = 0; at <= text.size();) {
    auto end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    n += text.compare(at, end - at, line) == 0;
    at = end + 1;
  }
  return n;
}

}  // namespace

std::unique_ptr<ChildProcess> RedisSentinels::server(const std::vector<std::string>& args) {
  std::vector<std::string> argv{"/usr/bin/redis-server"};
  argv.insert(argv.end(), args.begin(), args.end());
  return std::make_unique<ChildProcess>(argv);
}

RedisSentinels::RedisSentinels() {
  static int counter = 0;
  dir_ = fs::temp_directory_path() /
         ("floodgate-sentinel-" + std::to_string(getpid()) + "-" + std::to_string(++counter));
  fs::create_directories(dir_);
  master_ = free_port();
  replica_ = free_port();
  auto node = [&](std::uint16_t port, const std::string& name) {
    fs::create_directories(dir_ / name);
    return std::vector<std::string>{"--port",       std::to_string(port),
                                    "--bind",       "127.0.0.1",
                                    "--save",       "",
                                    "--appendonly", "no",
                                    "--dir",        (dir_ / name).string(),
                                    "--logfile",    (dir_ / name / "redis.log").string()};
  };
  master_process_ = server(node(master_, "master"));
  auto replica = node(replica_, "replica");
  replica.insert(replica.end(), {"--replicaof", "127.0.0.1", std::to_string(master_)});
  others_.push_back(server(replica));
  // In sync before the sentinels start, so their first look at the master lists the replica
  // (else they find it at their next INFO, 10 s later).
  if (!wait_until(
          [&] {
            return redis_cli(replica_, "INFO replication", 2).find("master_link_status:up") !=
                   std::string::npos;
          },
          10s))
    throw std::runtime_error("the replica did not sync with the master");
  for (int i = 0; i < 3; ++i) {
    const auto port = free_port();
    const auto dir = dir_ / ("sentinel" + std::to_string(i));
    fs::create_directories(dir);
    const auto conf = dir / "sentinel.conf";  // Sentinel rewrites it: its own file
    std::ofstream(conf) << "port " << port << "\nbind 127.0.0.1\ndir " << dir.string()
                        << "\nlogfile " << (dir / "sentinel.log").string()
                        << "\nsentinel monitor mymaster 127.0.0.1 " << master_ << " 2"
                        << "\nsentinel down-after-milliseconds mymaster 500"
                        << "\nsentinel failover-timeout mymaster 3000"
                        << "\nsentinel parallel-syncs mymaster 1\n";
    sentinels_.push_back(port);
    others_.push_back(server({conf.string(), "--sentinel"}));
  }
  for (auto port : sentinels_)
    if (!wait_until(
            [&] {
              auto replicas = redis_cli(port, "SENTINEL replicas mymaster", 2);
              auto peers = redis_cli(port, "SENTINEL sentinels mymaster", 2);
              return replicas.find(std::to_string(replica_)) != std::string::npos &&
                     replicas.find("disconnected") == std::string::npos &&
                     count_lines(peers, "name") >= 2;
            },
            20s))
      throw std::runtime_error("sentinel " + std::to_string(port) +
                               " did not find the replica and the other sentinels");
}

RedisSentinels::~RedisSentinels() {
  others_.clear();
  master_process_.reset();
  std::error_code ignored;
  fs::remove_all(dir_, ignored);
}

std::string RedisSentinels::store_yaml() const {
  std::string out = "sentinels: [";
  for (std::size_t i = 0; i < sentinels_.size(); ++i)
    out += (i ? ", " : "") + std::string("\"127.0.0.1:") + std::to_string(sentinels_[i]) + "\"";
  return out + "], master_name: mymaster";
}

void RedisSentinels::kill_master() {
  if (master_process_) master_process_->signal_and_wait(SIGKILL, 5s);
  master_process_.reset();
}

std::uint16_t RedisSentinels::named_master() const {
  std::map<std::string, int> votes;
  for (auto port : sentinels_) {
    auto out = redis_cli(port, "SENTINEL get-master-addr-by-name mymaster", 2);
    auto nl = out.find('\n');
    if (nl != std::string::npos) ++votes[out.substr(nl + 1)];
  }
  for (const auto& [text, n] : votes) {
    unsigned port = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), port);
    if (n * 2 > static_cast<int>(sentinels_.size()) && ec == std::errc() && port < 65536)
      return static_cast<std::uint16_t>(port);
  }
  return 0;
}

}  // namespace floodgate::testing
