#pragma once
// config_source (SPEC "Fleet configuration"): the config is fetched from a url, and a fetched
// document is applied only if its Ed25519 signature (url + ".sig") verifies, its `version:` is
// above the one in force and it validates; then it is published like a SIGHUP reload. Polled
// on a thread of its own every `poll` +-10 % (so that a fleet started together does not ask in
// step), with If-None-Match: an unchanged config costs a 304. The last applied document and its
// signature are kept in `cache`, the config a start uses when the url cannot give one. SIGHUP
// asks at once, without If-None-Match. Every outcome is counted (Metrics::ConfigUpdate) and logged.

#include <spdlog/logger.h>

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "floodgate/config/loader.hpp"
#include "floodgate/metrics/metrics.hpp"

namespace floodgate::app {

class ConfigFeed {
 public:
  static constexpr auto kTimeout = std::chrono::seconds(10);  // one GET, connect to body
  static constexpr std::size_t kMaxDocument = 16 << 20;

  // `base_dir`: where the fetched config's relative paths start (the local file's directory).
  ConfigFeed(config::FeedSettings settings, std::string base_dir);
  ~ConfigFeed();
  ConfigFeed(const ConfigFeed&) = delete;
  ConfigFeed& operator=(const ConfigFeed&) = delete;

  // At start (before the metrics exist: they need the config's pop): the fetched config, or
  // else the cached one (logged); null with the reason logged when neither can serve. And the
  // fetch's outcome, for the metrics.
  struct First {
    config::ConfigPtr config;
    metrics::Metrics::ConfigUpdate outcome;
  };
  First first(spdlog::logger& log);
  // From now on, each config applied goes to `apply` (on the feed's thread).
  using Apply = std::function<void(const config::ConfigPtr&)>;
  void start(metrics::Metrics& metrics, std::shared_ptr<spdlog::logger> log, Apply apply);
  // Fetch at once (SIGHUP).
  void poll_now();

 private:
  struct Document {
    std::string bytes, signature;
    bool not_modified = false;  // a 304: nothing else is set
  };
  // A document checked: the config, or the outcome that refused it and why.
  struct Checked {
    config::ConfigPtr config;
    metrics::Metrics::ConfigUpdate outcome = metrics::Metrics::ConfigUpdate::applied;
    std::string why;
    std::vector<std::string> errors;    // an invalid one's, FILE:LINE:COL: message each
    std::vector<std::string> warnings;  // a valid one's
  };
  // A refused document's reason, its errors one line each.
  void log_refusal(spdlog::logger& log, const Checked& c, std::string_view outcome) const;
  // Fetches the document (If-None-Match: etag_ when `conditional`) and its signature.
  // nullopt with `why` set on a failure.
  std::optional<Document> fetch(bool conditional, std::string& why, std::string& etag);
  Checked check(const Document& d, std::optional<std::int64_t> above) const;
  // The cache: one file, the signature in its first line (a YAML comment), the document after
  // it, replaced whole by a rename, so that a crash or a full disk never pairs a signature with
  // another document.
  void keep(const Document& d, spdlog::logger& log) const;
  std::optional<Document> cached(std::string& why) const;
  void poll_once(bool conditional);
  void run();

  config::FeedSettings settings_;
  std::string base_dir_;
  std::string shown_;                    // the url, redacted
  metrics::Metrics* metrics_ = nullptr;  // from start()
  std::shared_ptr<spdlog::logger> log_;
  Apply apply_;
  // The config in force, as the feed knows it: its version and bytes' hash, and the ETag that
  // answered it (or a refused document, so that it is not fetched again unchanged).
  std::optional<std::int64_t> version_;
  std::string sha256_;
  std::string etag_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  bool now_ = false;
  std::thread thread_;
};

}  // namespace floodgate::app
