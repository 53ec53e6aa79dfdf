#pragma once
// Redis Sentinel for one test, all real (Debian's redis-server; `--sentinel` runs it as a
// sentinel): a master, one replica in sync, and three sentinels that monitor the master as
// "mymaster" with a quorum of 2, declare it down after 500 ms and fail over within 3 s.
// Everything on free loopback ports, in a temp dir removed with the object.

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "harness.hpp"

namespace floodgate::testing {

class RedisSentinels {
 public:
  RedisSentinels();  // returns once the sentinels know the replica and each other
  ~RedisSentinels();
  RedisSentinels(const RedisSentinels&) = delete;
  RedisSentinels& operator=(const RedisSentinels&) = delete;

  std::uint16_t master_port() const { return master_; }  // the first master
  std::uint16_t replica_port() const { return replica_; }
  // `sentinels: [...], master_name: mymaster` for store.redis.
  std::string store_yaml() const;
  void kill_master();  // SIGKILL
  // The master's port as most sentinels name it now (0 when no majority agrees).
  std::uint16_t named_master() const;

 private:
  std::unique_ptr<ChildProcess> server(const std::vector<std::string>& args);
  std::filesystem::path dir_;
  std::uint16_t master_ = 0;
  std::uint16_t replica_ = 0;
  std::vector<std::uint16_t> sentinels_;
  std::unique_ptr<ChildProcess> master_process_;
  std::vector<std::unique_ptr<ChildProcess>> others_;
};

}  // namespace floodgate::testing
