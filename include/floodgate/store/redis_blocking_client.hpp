#pragma once
// Redis for a thread that may block (the overrides' poller and the admin thread, never a
// worker): one command at a time, waited for, on the same connection code the workers use, so
// the overrides speak TLS (and follow a master) exactly as the decisions do. Not thread-safe:
// one thread at a time (the caller's mutex orders them).

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "floodgate/store/redis_reply.hpp"
#include "floodgate/store/redis_store.hpp"

namespace spdlog {
class logger;
}

namespace floodgate::store {

// A sentinel's answer to SENTINEL GET-MASTER-ADDR-BY-NAME ("*2 host port"), checked as a
// cluster's node names are: false with `why` for nil (an unknown name), an error, or anything
// that is not a host and a port. The workers' locator and the overrides' client share it.
bool master_address_of(const redisReply* reply, std::string& host, std::uint16_t& port,
                       std::string& why);

class RedisBlockingClient {
 public:
  RedisBlockingClient(RedisAccess access, spdlog::logger& log,
                      std::chrono::milliseconds connect_timeout = std::chrono::seconds(1));
  ~RedisBlockingClient();
  RedisBlockingClient(const RedisBlockingClient&) = delete;
  RedisBlockingClient& operator=(const RedisBlockingClient&) = delete;

  // `args` sent to host:port (connecting first when needed) and its reply, error replies
  // included; null with `why` when there is no reply within `timeout` (the connection is then
  // dropped, so a late reply never answers the next command).
  RedisReply command(const std::string& host, std::uint16_t port,
                     const std::vector<std::string>& args, std::chrono::milliseconds timeout,
                     std::string& why);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace floodgate::store
