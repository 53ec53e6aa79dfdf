#pragma once
// The access log's file (log.access_log: { path }): opened with O_APPEND, each line one
// write(2), so lines from every worker stay whole and a tail never sees half of one; reopened
// on SIGUSR1 as nginx does, so that logrotate can move the file away and have it made anew.

#include <spdlog/sinks/base_sink.h>

#include <memory>
#include <mutex>
#include <optional>
#include <string>

namespace floodgate::app {

class AccessLogFile final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  explicit AccessLogFile(std::string path) : path_(std::move(path)) {}
  ~AccessLogFile() override;
  AccessLogFile(const AccessLogFile&) = delete;
  AccessLogFile& operator=(const AccessLogFile&) = delete;

  // Opens the path (again, after a rotation). Why not, when it cannot: the file open before
  // stays open and keeps the lines.
  std::optional<std::string> open();
  const std::string& path() const { return path_; }

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override;
  void flush_() override {}  // nothing buffered: every line is written at once

 private:
  std::string path_;
  int fd_ = -1;
};

}  // namespace floodgate::app
