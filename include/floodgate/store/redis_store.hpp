#pragma once
// The Redis store: one EVALSHA per request evaluates all of its limits atomically, with
// Redis's clock. Past `timeout` a decision fails (the route's on_store_error applies); after
// repeated failures a circuit breaker fails requests at once and probes in the background.

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "floodgate/limit/clock.hpp"
#include "floodgate/store/limit_store.hpp"

namespace boost::asio {
class io_context;
}
namespace spdlog {
class logger;
}

namespace floodgate::store {

struct RedisStoreOptions {
  std::string host = "127.0.0.1";
  std::uint16_t port = 6379;
  std::string username;
  std::string password;
  std::chrono::milliseconds timeout{45};  // per decision
  int breaker_threshold = 3;              // consecutive failures that open the breaker
  std::chrono::milliseconds probe_interval{250};
  std::string instance_id;         // prefix of concurrency lease ids
  std::vector<std::string> seeds;  // redis_cluster: "host:port" of seed nodes
  // Tests only (the differential tests): pass this clock's time to the scripts instead of
  // letting them read Redis's TIME. Production leaves it null.
  const limit::Clock* test_clock = nullptr;
};

// One connection per master per worker; routes each script by its keys' slot.
std::unique_ptr<LimitStore> make_redis_cluster_store(boost::asio::io_context& ioc,
                                                     RedisStoreOptions options,
                                                     spdlog::logger& log);

std::unique_ptr<LimitStore> make_redis_store(boost::asio::io_context& ioc,
                                             RedisStoreOptions options, spdlog::logger& log);

}  // namespace floodgate::store
