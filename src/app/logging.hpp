#pragma once

#include <spdlog/logger.h>

#include <memory>

#include "floodgate/config/config.hpp"

namespace floodgate::app {

// A logger writing to stderr in the configured format; not registered with spdlog's global
// registry, so it is passed to whoever needs it.
std::shared_ptr<spdlog::logger> make_logger(const config::LogSettings& settings);
void apply_log_settings(spdlog::logger& log, const config::LogSettings& settings);
// The access log: one JSON object per line on stdout (the main log is on stderr).
std::shared_ptr<spdlog::logger> make_access_logger();

}  // namespace floodgate::app
