#include "logging.hpp"

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_sinks.h>

#include <vector>

namespace floodgate::app {

namespace {

enum class Escape { json, text };

// %*: the message with everything that could break its line escaped.
// - json: as the contents of a JSON string (quotes, backslashes, controls as \u00XX).
// - text: on one line, whatever its values hold. Control bytes (CR and LF above all, which
//   would let a value such as an admin API key forge a line of its own, attributed to anyone)
//   appear as \xHH, as /top writes them, and the backslash as \\, so that a value holding the
//   text "\x0a" cannot pass for an escaped byte.
template <Escape E>
class EscapedMessage final : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&,
              spdlog::memory_buf_t& dest) override {
    static constexpr char hex[] = "0123456789abcdef";
    for (char c : std::string_view(msg.payload.data(), msg.payload.size())) {
      auto u = static_cast<unsigned char>(c);
      if (c == '\\' || (E == Escape::json && c == '"')) {
        dest.push_back('\\');
        dest.push_back(c);
      } else if (E == Escape::json && u < 0x20) {
        const char esc[] = {'\\', 'u', '0', '0', hex[u >> 4], hex[u & 15]};
        dest.append(esc, esc + sizeof esc);
      } else if (E == Escape::text && (u < 0x20 || u == 0x7f)) {
        const char esc[] = {'\\', 'x', hex[u >> 4], hex[u & 15]};
        dest.append(esc, esc + sizeof esc);
      } else {
        dest.push_back(c);
      }
    }
  }
  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<EscapedMessage>();
  }
};

}  // namespace

AccessLog make_access_logger(const config::LogSettings& settings) {
  AccessLog out;
  std::vector<spdlog::sink_ptr> sinks;
  if (!settings.access_log_path.empty()) {
    out.file = std::make_shared<AccessLogFile>(settings.access_log_path);
    if (auto why = out.file->open()) {
      out.error = *why;
      return out;
    }
    sinks.push_back(out.file);
  }
  if (settings.access_log_path.empty() || settings.access_log_stdout)
    sinks.push_back(std::make_shared<spdlog::sinks::stdout_sink_mt>());
  out.logger = std::make_shared<spdlog::logger>("access", sinks.begin(), sinks.end());
  out.logger->set_pattern("%v");  // each line is already a JSON object
  out.logger->set_level(spdlog::level::info);
  return out;
}

void apply_log_settings(spdlog::logger& log, const config::LogSettings& s) {
  static constexpr spdlog::level::level_enum levels[] = {spdlog::level::trace, spdlog::level::debug,
                                                         spdlog::level::info,  spdlog::level::warn,
                                                         spdlog::level::err,   spdlog::level::off};
  log.set_level(levels[static_cast<int>(s.level)]);
  auto f = std::make_unique<spdlog::pattern_formatter>(spdlog::pattern_time_type::utc);
  if (s.format == config::LogFormat::json)
    f->add_flag<EscapedMessage<Escape::json>>('*').set_pattern(
        R"({"time":"%Y-%m-%dT%H:%M:%S.%eZ","level":"%l","msg":"%*"})");
  else
    f->add_flag<EscapedMessage<Escape::text>>('*').set_pattern("%Y-%m-%dT%H:%M:%S.%eZ %l %*");
  log.set_formatter(std::move(f));
}

std::shared_ptr<spdlog::logger> make_logger(const config::LogSettings& settings) {
  auto log = std::make_shared<spdlog::logger>("floodgate",
                                              std::make_shared<spdlog::sinks::stderr_sink_mt>());
  apply_log_settings(*log, settings);
  return log;
}

}  // namespace floodgate::app
