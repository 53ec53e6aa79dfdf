#pragma once
// The one place that turns `store:` into LimitStores: main and the integration tests share it.

#include <memory>

#include "floodgate/config/config.hpp"
#include "floodgate/server/server.hpp"
#include "floodgate/store/leased_store.hpp"
#include "floodgate/store/memory_store.hpp"
#include "floodgate/store/redis_store.hpp"

namespace floodgate::app {

// Per worker: a handle on the shared in-process state.
http::StoreFactory memory_store_factory(store::MemoryState& memory);

// How every connection to the store logs in (and speaks TLS): the workers' and the overrides'.
store::RedisAccess redis_access(const config::RedisSettings& redis);
// The same for the sentinels: their own user and password, the same TLS.
store::RedisAccess sentinel_access(const config::RedisSettings& redis);

// Per worker: the configured backend (its own Redis connection for `redis`), deciding leased
// limits from `leases` (the instance's one book) by `clock`. `test_time` is for tests only
// (store::RedisStoreOptions::TestTime): main never passes one.
http::StoreFactory configured_store_factory(const config::Config& config,
                                            store::MemoryState& memory, store::LeaseBook& leases,
                                            const limit::Clock& clock,
                                            std::shared_ptr<spdlog::logger> log,
                                            store::RedisStoreOptions::TestTime test_time = {});

}  // namespace floodgate::app
