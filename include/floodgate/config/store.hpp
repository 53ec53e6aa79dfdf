#pragma once
// `store:`: where limits are decided (the embedded store, Redis, Redis Cluster), and how every
// connection to Redis is made (TLS, Sentinel, credentials). Read at start: a reload reports
// changes here as needing a restart (restart_changes.cpp).

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "floodgate/config/address.hpp"
#include "floodgate/config/units.hpp"

struct ssl_ctx_st;

namespace floodgate::config {

using namespace std::chrono_literals;

enum class StoreBackend { memory, redis, redis_cluster };

// `store.redis.tls`: TLS to every node (rediss), the server verified against `ca_file` (the
// system's CAs when empty), a client certificate when `cert` and `key` are given.
struct RedisTls {
  std::string ca_file;
  std::string cert;
  std::string key;
  std::string server_name;              // the name certificates carry; empty: the node's address
  std::shared_ptr<ssl_ctx_st> context;  // built at load time, so a bad file fails the check
};

struct RedisSettings {
  Endpoint address{"127.0.0.1", 6379};
  std::vector<Endpoint> nodes;
  std::string username;
  std::string password;
  Duration timeout = 45ms;
  std::optional<RedisTls> tls;
  // Redis Sentinel (backend redis): the master of `master_name` as these sentinels name it,
  // instead of `address`. Sentinel has its own password (and ACL user), often not the master's.
  std::vector<Endpoint> sentinels;
  std::string master_name;
  std::string sentinel_username;
  std::string sentinel_password;
};

struct StoreSettings {
  StoreBackend backend = StoreBackend::memory;
  RedisSettings redis;
  std::string key_prefix = "rl";
  std::string key_secret;  // empty: a built-in constant is used, with a warning
  int instances = 1;
  std::uint64_t max_keys = 1'000'000;  // memory store: cap on live keys (evictions are counted)
};

}  // namespace floodgate::config
