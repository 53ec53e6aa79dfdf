#include "config_feed.hpp"

#include <openssl/evp.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "floodgate/config/redact.hpp"
#include "https_get.hpp"

namespace floodgate::app {

namespace {

using Update = metrics::Metrics::ConfigUpdate;

// Whether `signature` is `key`'s Ed25519 signature of `bytes` (no digest: Ed25519 signs the
// message itself, as `openssl pkeyutl -sign -rawin` does).
bool verifies(evp_pkey_st* key, std::string_view bytes, std::string_view signature) {
  if (signature.size() != 64) return false;
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  if (!ctx || EVP_DigestVerifyInit(ctx.get(), nullptr, nullptr, nullptr, key) != 1) return false;
  return EVP_DigestVerify(ctx.get(), reinterpret_cast<const unsigned char*>(signature.data()),
                          signature.size(), reinterpret_cast<const unsigned char*>(bytes.data()),
                          bytes.size()) == 1;
}

std::optional<std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  return std::move(text).str();
}

// Replaces `path` whole (a reader never sees half a file): written aside, then renamed.
bool write_file(const std::string& path, std::string_view bytes) {
  const auto aside = path + ".new";
  {
    std::ofstream out(aside, std::ios::binary | std::ios::trunc);
    if (!out || !out.write(bytes.data(), std::streamsize(bytes.size())) || !out.flush())
      return false;
  }
  return std::rename(aside.c_str(), path.c_str()) == 0;
}

std::string version_text(std::optional<std::int64_t> v) {
  return v ? std::to_string(*v) : std::string("(none)");
}

}  // namespace

ConfigFeed::ConfigFeed(config::FeedSettings settings, std::string base_dir)
    : settings_(std::move(settings)),
      base_dir_(std::move(base_dir)),
      shown_(config::redacted_url(settings_.url)) {}

ConfigFeed::~ConfigFeed() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::optional<ConfigFeed::Document> ConfigFeed::fetch(bool conditional, std::string& why,
                                                      std::string& etag) {
  auto doc = https_get(settings_, {.target = settings_.target,
                                   .accept = "application/yaml, text/yaml, */*",
                                   .if_none_match = conditional ? etag_ : std::string_view(),
                                   .max_body = kMaxDocument,
                                   .timeout = kTimeout});
  if (doc.error.empty() && doc.status == 304 && conditional) return Document{};
  if (doc.error.empty() && doc.status != 200) doc.error = "answered " + std::to_string(doc.status);
  if (!doc.error.empty()) {
    why = "fetching " + shown_ + " failed: " + doc.error;
    return std::nullopt;
  }
  // The url + ".sig" literally, as the publisher names it (SPEC "Fleet configuration").
  const auto sig_target = settings_.target + ".sig";
  auto sig = https_get(settings_, {.target = sig_target,
                                   .accept = "application/octet-stream, */*",
                                   .max_body = 1024,
                                   .timeout = kTimeout});
  if (sig.error.empty() && sig.status != 200) sig.error = "answered " + std::to_string(sig.status);
  if (!sig.error.empty()) {
    why = "fetching " + shown_ + ".sig failed: " + sig.error;
    return std::nullopt;
  }
  etag = std::move(doc.etag);
  return Document{std::move(doc.body), std::move(sig.body)};
}

ConfigFeed::Checked ConfigFeed::check(const Document& d, std::optional<std::int64_t> above) const {
  if (!verifies(settings_.key.get(), d.bytes, d.signature))
    return {nullptr, Update::bad_signature,
            "its signature (" + std::to_string(d.signature.size()) +
                " bytes) does not verify with " + settings_.public_key};
  auto r = config::load_fetched_config(d.bytes, shown_, base_dir_, config::process_env());
  if (!r.config) {
    Checked out{nullptr, Update::invalid,
                std::to_string(r.errors.size()) + " error" + (r.errors.size() == 1 ? "" : "s")};
    for (const auto& e : r.errors) out.errors.push_back(e.to_string());
    return out;
  }
  if (above && *r.config->version <= *above) {
    if (*r.config->version == *above && r.config->sha256 == sha256_)
      return {nullptr, Update::unchanged, ""};
    return {nullptr, Update::stale_version,
            "its version " + std::to_string(*r.config->version) + " is not above " +
                std::to_string(*above) + ", the one in force"};
  }
  return {std::move(r.config), Update::applied, ""};
}

void ConfigFeed::log_refusal(spdlog::logger& log, const Checked& c,
                             std::string_view outcome) const {
  log.error("config_source: the config at {} is refused: {}; {}", shown_, c.why, outcome);
  for (const auto& e : c.errors) log.error("config_source: {}", e);
}

void ConfigFeed::keep(const Document& d, spdlog::logger& log) const {
  if (settings_.cache.empty()) return;
  if (!write_file(settings_.cache + ".sig", d.signature) || !write_file(settings_.cache, d.bytes))
    log.warn(
        "config_source: cannot write the cache {}: {}; a start with the url down will not "
        "find this config",
        settings_.cache, std::strerror(errno));
}

ConfigFeed::First ConfigFeed::first(spdlog::logger& log) {
  // The cache first: its version is the floor a fetched config must reach (versions only go
  // up, across restarts too).
  std::string cache_why = "no cache is set";
  Checked from_cache;
  if (!settings_.cache.empty()) {
    auto bytes = read_file(settings_.cache);
    auto signature = read_file(settings_.cache + ".sig");
    if (!bytes || !signature) {
      cache_why = "the cache " + settings_.cache + " (and its .sig) cannot be read";
    } else {
      from_cache = check(Document{std::move(*bytes), std::move(*signature)}, std::nullopt);
      if (!from_cache.config) cache_why = "the cache " + settings_.cache + ": " + from_cache.why;
    }
  }
  std::optional<std::int64_t> above;  // the cache's version - 1: a fetched one may equal it
  if (from_cache.config && from_cache.config->version) above = *from_cache.config->version - 1;
  std::string why, etag;
  Update outcome = Update::fetch_error;
  if (auto fetched = fetch(false, why, etag)) {
    auto checked = check(*fetched, above);
    if (checked.config) {
      version_ = checked.config->version;
      sha256_ = checked.config->sha256;
      etag_ = std::move(etag);
      keep(*fetched, log);
      log.info("config_source: version {} from {} (sha256 {})", version_text(version_), shown_,
               sha256_.substr(0, 12));
      return {checked.config, Update::applied};
    }
    outcome = checked.outcome;
    log_refusal(log, checked, "not used");
    why = "the config at " + shown_ + " is refused: " + checked.why;
  }
  if (!from_cache.config) {
    log.critical("config_source: {}; and {}: nothing to serve", why, cache_why);
    return {nullptr, outcome};
  }
  version_ = from_cache.config->version;
  sha256_ = from_cache.config->sha256;
  log.warn("config_source: {}; serving the cached config, version {} from {}", why,
           version_text(version_), settings_.cache);
  return {from_cache.config, outcome};
}

void ConfigFeed::start(metrics::Metrics& metrics, std::shared_ptr<spdlog::logger> log,
                       Apply apply) {
  metrics_ = &metrics;
  log_ = std::move(log);
  apply_ = std::move(apply);
  thread_ = std::thread([this] { run(); });
}

void ConfigFeed::poll_now() {
  {
    std::lock_guard lock(mutex_);
    now_ = true;
  }
  wake_.notify_all();
}

void ConfigFeed::poll_once() {
  std::string why, etag;
  auto fetched = fetch(true, why, etag);
  if (!fetched) {
    metrics_->count(Update::fetch_error);
    log_->warn("config_source: {}; version {} keeps serving", why, version_text(version_));
    return;
  }
  if (fetched->bytes.empty() && fetched->signature.empty()) {  // 304
    metrics_->count(Update::unchanged);
    return;
  }
  auto checked = check(*fetched, version_);
  metrics_->count(checked.outcome);
  // A refused document is not fetched again until it changes: it would be refused again.
  // Except for a bad signature, which may be a publisher midway (the new document up, its
  // signature not yet): that one is tried again at the next poll.
  if (checked.outcome != Update::bad_signature) etag_ = etag;
  if (checked.outcome == Update::unchanged) return;
  if (!checked.config) {
    log_refusal(*log_, checked, "version " + version_text(version_) + " keeps serving");
    return;
  }
  keep(*fetched, *log_);
  version_ = checked.config->version;
  sha256_ = checked.config->sha256;
  apply_(checked.config);
}

void ConfigFeed::run() {
  std::minstd_rand random(std::random_device{}());
  std::uniform_real_distribution<double> jitter(0.9, 1.1);
  std::unique_lock lock(mutex_);
  while (!stop_) {
    const auto wait =
        std::chrono::duration_cast<std::chrono::milliseconds>(settings_.poll * jitter(random));
    wake_.wait_for(lock, wait, [&] { return stop_ || now_; });
    if (stop_) break;
    now_ = false;
    lock.unlock();
    // Nothing may leave the thread (std::terminate would take the proxy down).
    try {
      poll_once();
    } catch (const std::exception& e) {
      metrics_->count(Update::fetch_error);
      log_->error("config_source: {}; version {} keeps serving", e.what(), version_text(version_));
    }
    lock.lock();
  }
}

}  // namespace floodgate::app
