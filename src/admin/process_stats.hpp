#pragma once
// The process's own resource use, as Prometheus's process_* metrics report it (the names and
// meanings client libraries use, so that stock dashboards and alerts work): read from /proc
// at each scrape.

#include <cstdint>
#include <optional>

namespace floodgate::admin {

struct ProcessStats {
  double cpu_seconds = 0;  // user + system
  std::uint64_t resident_bytes = 0;
  std::uint64_t virtual_bytes = 0;
  std::uint64_t open_fds = 0;
  std::uint64_t max_fds = 0;      // the soft limit
  double start_time_seconds = 0;  // Unix time
};

// Nothing when /proc cannot be read (not Linux, or hidden): the metrics are then left out.
std::optional<ProcessStats> read_process_stats();

}  // namespace floodgate::admin
