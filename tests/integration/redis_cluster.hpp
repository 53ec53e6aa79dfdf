#pragma once
// A real Redis Cluster on loopback for one test: 3 masters and 3 replicas, created with
// redis-cli --cluster create, in a temp dir, on free ports.

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "harness.hpp"

namespace floodgate::testing {

class RedisCluster {
 public:
  RedisCluster();
  ~RedisCluster();
  const std::vector<std::uint16_t>& ports() const { return ports_; }
  std::vector<std::uint16_t> masters() const;
  std::string cli(std::uint16_t port, const std::string& args) const;
  void kill(std::uint16_t port);  // SIGKILL one node
  // Waits until every live node reports cluster_state:ok and no failed master remains.
  bool wait_ok(std::chrono::milliseconds limit);
  // Waits until a replica has replaced every killed master (3 live masters, state ok). If the
  // election has not happened by half of `limit`, the orphaned replica is told to take over:
  // what the tests check is that floodgate follows a failover, not Redis's election timing.
  bool wait_failover(std::chrono::milliseconds limit);
  // CLUSTER NODES as a live node sees it and the tail of each live replica's log, for a failure
  // message.
  std::string describe() const;

 private:
  // Waits until every live node lists all 3 replicas as replicas, so a master killed next
  // already has a successor its peers will vote for.
  bool wait_replicas_known(std::chrono::milliseconds limit);
  void start_node(std::size_t i);  // (again) on new ports
  std::filesystem::path dir_;
  std::vector<std::uint16_t> ports_;
  std::vector<std::unique_ptr<ChildProcess>> nodes_;
};

// A proxy on 127.0.0.1:`listen` (0: any) with 2 workers in front of the origin on `origin`,
// deciding in `cluster` (every node a seed, `timeout` per store call), as one of 2 instances.
std::string cluster_config(std::uint16_t listen, std::uint16_t origin, const RedisCluster& cluster,
                           const std::string& routes, const std::string& timeout = "500ms");

}  // namespace floodgate::testing
