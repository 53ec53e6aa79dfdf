#pragma once
// A coroutine of the worker's that throws (it should not) is reported and counted; the
// worker goes on.

#include <spdlog/logger.h>

#include <exception>

#include "floodgate/metrics/metrics.hpp"

namespace floodgate::http {

inline void report_exception(spdlog::logger& log, metrics::Metrics& metrics, const char* what,
                             std::exception_ptr e) {
  metrics.unexpected_exceptions.fetch_add(1, std::memory_order_relaxed);
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& ex) {
    log.error("{}: unexpected exception: {}", what, ex.what());
  } catch (...) {
    log.error("{}: unexpected exception (not a std::exception)", what);
  }
}

// The completion handler of co_spawn for them.
inline auto log_exceptions(spdlog::logger& log, metrics::Metrics& metrics, const char* what) {
  return [&log, &metrics, what](std::exception_ptr e) {
    if (e) report_exception(log, metrics, what, e);
  };
}

}  // namespace floodgate::http
