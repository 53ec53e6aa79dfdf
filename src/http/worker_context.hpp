#pragma once
// What one worker's sessions share. Everything here belongs to a single event loop thread,
// except the config source (atomic) and the logger (thread-safe).

#include <spdlog/logger.h>

#include <cstdint>

#include "floodgate/config/config_source.hpp"
#include "upstream_pool.hpp"

namespace floodgate::http {

struct WorkerContext {
  config::ConfigSource& config;
  spdlog::logger& log;
  UpstreamPool pool;
  std::uint64_t in_flight = 0;  // requests between header read and response end
  bool draining = false;        // set once: finish the current request, then close
};

}  // namespace floodgate::http
