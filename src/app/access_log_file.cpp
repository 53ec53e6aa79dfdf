#include "access_log_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace floodgate::app {

AccessLogFile::~AccessLogFile() {
  if (fd_ >= 0) ::close(fd_);
}

std::optional<std::string> AccessLogFile::open() {
  const int fd = ::open(path_.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
  if (fd < 0) return "cannot open the access log " + path_ + ": " + std::strerror(errno);
  std::lock_guard lock(mutex_);  // base_sink's: no line is being written meanwhile
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
  return std::nullopt;
}

void AccessLogFile::sink_it_(const spdlog::details::log_msg& msg) {
  spdlog::memory_buf_t line;
  formatter_->format(msg, line);
  const char* at = line.data();
  std::size_t left = line.size();
  while (left > 0 && fd_ >= 0) {
    const auto n = ::write(fd_, at, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // a full disk loses the line, never the request
    at += n;
    left -= static_cast<std::size_t>(n);
  }
}

}  // namespace floodgate::app
