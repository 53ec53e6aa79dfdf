#include "logging.hpp"

#include <spdlog/sinks/stdout_sinks.h>

namespace floodgate::app {

void apply_log_settings(spdlog::logger& log, const config::LogSettings& s) {
  static constexpr spdlog::level::level_enum levels[] = {
      spdlog::level::trace, spdlog::level::debug, spdlog::level::info,
      spdlog::level::warn,  spdlog::level::err,   spdlog::level::off};
  log.set_level(levels[static_cast<int>(s.level)]);
  if (s.format == config::LogFormat::json)
    log.set_pattern(R"({"time":"%Y-%m-%dT%H:%M:%S.%eZ","level":"%l","msg":"%v"})",
                    spdlog::pattern_time_type::utc);
  else
    log.set_pattern("%Y-%m-%dT%H:%M:%S.%eZ %l %v", spdlog::pattern_time_type::utc);
}

std::shared_ptr<spdlog::logger> make_logger(const config::LogSettings& settings) {
  auto log = std::make_shared<spdlog::logger>("floodgate",
                                              std::make_shared<spdlog::sinks::stderr_sink_mt>());
  apply_log_settings(*log, settings);
  return log;
}

}  // namespace floodgate::app
