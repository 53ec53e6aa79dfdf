#include "stores.hpp"

#include <boost/asio/io_context.hpp>

namespace floodgate::app {

store::RedisAccess redis_access(const config::RedisSettings& redis) {
  store::RedisAccess a;
  a.username = redis.username;
  a.password = redis.password;
  if (redis.tls) {
    a.tls = redis.tls->context;
    a.server_name = redis.tls->server_name;
  }
  return a;
}

store::RedisAccess sentinel_access(const config::RedisSettings& redis) {
  auto a = redis_access(redis);
  a.username = redis.sentinel_username;
  a.password = redis.sentinel_password;
  return a;
}

http::StoreFactory memory_store_factory(store::MemoryState& memory) {
  return [&memory](boost::asio::io_context& ioc) {
    return std::make_unique<store::MemoryStore>(memory, ioc.get_executor());
  };
}

http::StoreFactory configured_store_factory(const config::Config& config,
                                            store::MemoryState& memory, store::LeaseBook& leases,
                                            const limit::Clock& clock,
                                            std::shared_ptr<spdlog::logger> log,
                                            store::RedisStoreOptions::TestTime test_time) {
  if (config.store.backend == config::StoreBackend::memory) return memory_store_factory(memory);
  const auto& rs = config.store.redis;
  store::RedisStoreOptions options;
  options.host = rs.address.host;
  options.port = rs.address.port;
  options.access = redis_access(rs);
  for (const auto& s : rs.sentinels) options.sentinels.push_back(s.to_string());
  options.master_name = rs.master_name;
  options.sentinel_access = sentinel_access(rs);
  options.timeout = rs.timeout;
  options.test_time = test_time;
  if (config.store.backend == config::StoreBackend::redis_cluster) {
    for (const auto& n : rs.nodes) options.seeds.push_back(n.to_string());
    return [options, log, &leases, &clock](boost::asio::io_context& ioc) {
      return store::make_leased_store(ioc, store::make_redis_cluster_store(ioc, options, *log),
                                      leases, clock, options.timeout);
    };
  }
  return [options, log, &leases, &clock](boost::asio::io_context& ioc) {
    return store::make_leased_store(ioc, store::make_redis_store(ioc, options, *log), leases, clock,
                                    options.timeout);
  };
}

}  // namespace floodgate::app
