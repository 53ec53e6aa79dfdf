#pragma once
// jwt.jwks: the issuer's key set, fetched over verified HTTPS on a thread of its own and
// published to a keys::JwksCell that every worker reads per verification. Refreshed every
// `refresh`; at once when a token names an unknown kid (the issuer rotated), at most once per
// kUnknownKidInterval for that reason; a failed fetch keeps the last good set (a metric and a
// warning say so) and is retried after kRetry. A reload that changes the url drops the
// old issuer's keys and fetches the new one at once. (A host name that the resolver cannot
// answer holds the fetch as long as getaddrinfo takes, past kTimeout: Asio resolves on a
// thread of its own.)

#include <spdlog/logger.h>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "floodgate/config/config_source.hpp"
#include "floodgate/keys/jwks.hpp"
#include "floodgate/metrics/metrics.hpp"

namespace floodgate::app {

class JwksRefresher {
 public:
  static constexpr auto kUnknownKidInterval = std::chrono::seconds(10);
  static constexpr auto kRetry = std::chrono::seconds(10);
  static constexpr auto kTimeout = std::chrono::seconds(5);  // one fetch, connect to body
  static constexpr std::size_t kMaxBody = 1 << 20;           // a JWKS is a few KiB

  JwksRefresher(config::ConfigSource& source, metrics::Metrics& metrics,
                std::shared_ptr<spdlog::logger> log);
  ~JwksRefresher();
  JwksRefresher(const JwksRefresher&) = delete;
  JwksRefresher& operator=(const JwksRefresher&) = delete;

  keys::JwksCell& cell() { return cell_; }
  // Fetches once now when the config names a JWKS (so that the first requests find keys),
  // then keeps the set fresh on its own thread.
  void start();

 private:
  void tick();
  void safe_tick();
  bool fetch(const config::JwksSettings& s);
  void run();

  config::ConfigSource& source_;
  metrics::Metrics& metrics_;
  std::shared_ptr<spdlog::logger> log_;
  keys::JwksCell cell_;
  std::string url_;   // the one fetched last
  std::string kids_;  // the set's kids, for logging a change
  std::chrono::steady_clock::time_point due_{}, last_asked_{};
  std::chrono::system_clock::time_point fetched_at_{};
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace floodgate::app
