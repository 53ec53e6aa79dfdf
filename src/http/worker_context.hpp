#pragma once
// What one worker's sessions share. Everything here belongs to a single event loop thread,
// except the config source (atomic), the logger and the clock (thread-safe).

#include <spdlog/logger.h>

#include <cstdint>
#include <memory>
#include <string>

#include "floodgate/config/config_source.hpp"
#include "floodgate/keys/key_builder.hpp"
#include "floodgate/limit/clock.hpp"
#include "floodgate/limit/deny_cache.hpp"
#include "floodgate/store/limit_store.hpp"
#include "upstream_pool.hpp"

namespace floodgate::http {

// Per-worker decision counts (issue 5 exports them as metrics).
struct Counters {
  std::uint64_t admitted = 0;
  std::uint64_t limited = 0;
  std::uint64_t shadow_limited = 0;
  std::uint64_t deny_cache_hits = 0;
  std::uint64_t store_error_open = 0;
  std::uint64_t store_error_closed = 0;
  std::uint64_t store_error_local = 0;
};

struct WorkerContext {
  config::ConfigSource& config;
  spdlog::logger& log;
  const limit::Clock& clock;
  UpstreamPool pool;
  std::unique_ptr<store::LimitStore> store;  // the configured backend
  std::unique_ptr<store::LimitStore> local;  // in-process: the `local` fallback
  std::unique_ptr<keys::KeyHasher> hasher;   // rebuilt when key_secret changes
  limit::DenyCache deny;
  Counters counters;
  std::string lease_prefix;     // "<instance>:<worker>:": concurrency lease / log entry ids
  std::uint64_t lease_seq = 0;
  // False once the worker is being torn down: coroutine frames destroyed with the event loop
  // must not touch the stores any more (they hold a copy of this flag, not the context).
  std::shared_ptr<bool> alive = std::make_shared<bool>(true);
  std::uint64_t in_flight = 0;  // requests between header read and response end
  bool draining = false;        // set once: finish the current request, then close
};

}  // namespace floodgate::http
