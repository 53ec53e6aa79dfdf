#pragma once
// The Redis store: one EVALSHA per request evaluates all of its limits atomically, with
// Redis's clock. Past `timeout` a decision fails (the route's on_store_error applies); after
// repeated failures a circuit breaker fails requests at once and probes in the background.

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "floodgate/limit/clock.hpp"
#include "floodgate/store/limit_store.hpp"

struct ssl_ctx_st;

namespace boost::asio {
class io_context;
}
namespace spdlog {
class logger;
}

namespace floodgate::store {

// How to talk to any node of the store: the same for every node of a cluster (and for the
// overrides' own connection).
struct RedisAccess {
  std::string username;             // ACL user (Redis 6+); empty: AUTH with the password alone
  std::string password;             // empty: no AUTH
  std::shared_ptr<ssl_ctx_st> tls;  // null: plain TCP; else TLS, verifying the server
  // TLS: the name the server's certificate must carry (and SNI); empty: the node's address as
  // written or announced (a DNS name, or an IP that the certificate must list).
  std::string server_name;
};

struct RedisStoreOptions {
  std::string host = "127.0.0.1";
  std::uint16_t port = 6379;
  RedisAccess access;
  std::chrono::milliseconds timeout{45};  // per decision
  int breaker_threshold = 3;              // consecutive failures that open the breaker
  std::chrono::milliseconds probe_interval{250};
  std::string instance_id;         // prefix of concurrency lease ids
  std::vector<std::string> seeds;  // redis_cluster: "host:port" of seed nodes
  // Sentinel (redis): "host:port" of the sentinels that name the master of `master_name`
  // (host and port above are then unused), reached with `sentinel_access`.
  std::vector<std::string> sentinels;
  std::string master_name;
  RedisAccess sentinel_access;
  // Tests only, where a date is the point (a month's end, the differential tests' fake clock):
  // `clock`'s time is sent with every call, and `library` (the tests' function library, whose
  // clock honours it: tests/lua/clock_injected.lua) is loaded instead of the shipped one, which
  // reads Redis's TIME whatever it is sent. Production leaves both empty.
  struct TestTime {
    const limit::Clock* clock = nullptr;
    std::string_view library;
  };
  TestTime test_time;
};

// One connection per master per worker; routes each script by its keys' slot.
std::unique_ptr<LimitStore> make_redis_cluster_store(boost::asio::io_context& ioc,
                                                     RedisStoreOptions options,
                                                     spdlog::logger& log);

std::unique_ptr<LimitStore> make_redis_store(boost::asio::io_context& ioc,
                                             RedisStoreOptions options, spdlog::logger& log);

}  // namespace floodgate::store
