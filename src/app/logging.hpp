#pragma once

#include <spdlog/logger.h>

#include <memory>
#include <string>

#include "access_log_file.hpp"
#include "floodgate/config/config.hpp"

namespace floodgate::app {

// A logger writing to stderr in the configured format; not registered with spdlog's global
// registry, so it is passed to whoever needs it.
std::shared_ptr<spdlog::logger> make_logger(const config::LogSettings& settings);
void apply_log_settings(spdlog::logger& log, const config::LogSettings& settings);
// The access log: one JSON object per line on stdout (the main log is on stderr), or in the
// file log.access_log names (and on stdout too with `stdout: true`).
struct AccessLog {
  std::shared_ptr<spdlog::logger> logger;
  std::shared_ptr<AccessLogFile> file;  // null: stdout only
  std::string error;                    // the file could not be opened (then no logger)
};
AccessLog make_access_logger(const config::LogSettings& settings);

}  // namespace floodgate::app
