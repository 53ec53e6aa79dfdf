#include "config_feed.hpp"

#include <fcntl.h>
#include <openssl/evp.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <utility>

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

// The signature's url: ".sig" after the path, before a query (?api_key=... stays the query).
std::string signature_target(const std::string& target) {
  const auto query = target.find('?');
  if (query == std::string::npos) return target + ".sig";
  return target.substr(0, query) + ".sig" + target.substr(query);
}

constexpr std::string_view kCacheHeader = "# floodgate config_source signature (Ed25519): ";

std::string base64(std::string_view bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3) + 1, '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(bytes.data()),
                                static_cast<int>(bytes.size()));
  out.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
  return out;
}

// The 64 bytes of a base64 Ed25519 signature (88 characters, "==" at the end); empty if not.
std::string unbase64_signature(std::string_view text) {
  if (text.size() != 88) return {};
  std::string out(66, '\0');
  const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(text.data()), 88);
  if (n != 66) return {};
  out.resize(64);  // EVP_DecodeBlock counts the two padding bytes
  return out;
}

// Replaces `path` whole: written to a name of this process's own, flushed to the disk, then
// renamed over it (a reader, or a crash, sees the old file or the new one).
bool replace_file(const std::string& path, std::string_view head, std::string_view body) {
  const auto aside = path + ".new-" + std::to_string(::getpid());
  const int fd = ::open(aside.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0640);
  if (fd < 0) return false;
  bool ok = true;
  for (auto part : {head, body})
    while (ok && !part.empty()) {
      const auto n = ::write(fd, part.data(), part.size());
      if (n < 0 && errno == EINTR) continue;
      ok = n > 0;
      if (ok) part.remove_prefix(static_cast<std::size_t>(n));
    }
  ok = ok && ::fsync(fd) == 0;
  ok = ::close(fd) == 0 && ok;
  if (ok && std::rename(aside.c_str(), path.c_str()) == 0) return true;
  const int err = errno;
  ::unlink(aside.c_str());
  errno = err;
  return false;
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
  if (doc.error.empty() && doc.status == 304 && conditional) return Document{.not_modified = true};
  if (doc.error.empty() && doc.status != 200) doc.error = "answered " + std::to_string(doc.status);
  if (!doc.error.empty()) {
    why = "fetching " + shown_ + " failed: " + doc.error;
    return std::nullopt;
  }
  auto sig = https_get(settings_, {.target = signature_target(settings_.target),
                                   .accept = "application/octet-stream, */*",
                                   .max_body = 1024,
                                   .timeout = kTimeout});
  if (sig.error.empty() && sig.status != 200) sig.error = "answered " + std::to_string(sig.status);
  if (!sig.error.empty()) {
    why = "fetching the signature of " + shown_ + " failed: " + sig.error;
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
  Checked out{std::move(r.config), Update::applied, ""};
  for (const auto& w : r.warnings) out.warnings.push_back(w.to_string());
  return out;
}

void ConfigFeed::log_refusal(spdlog::logger& log, const Checked& c,
                             std::string_view outcome) const {
  log.error("config_source: the config at {} is refused: {}; {}", shown_, c.why, outcome);
  for (const auto& e : c.errors) log.error("config_source: {}", e);
}

void ConfigFeed::keep(const Document& d, spdlog::logger& log) const {
  if (settings_.cache.empty()) return;
  const auto head = std::string(kCacheHeader) + base64(d.signature) + "\n";
  if (!replace_file(settings_.cache, head, d.bytes))
    log.warn(
        "config_source: cannot write the cache {}: {}; a start with the url down will not "
        "find this config",
        settings_.cache, std::strerror(errno));
}

std::optional<ConfigFeed::Document> ConfigFeed::cached(std::string& why) const {
  std::ifstream in(settings_.cache, std::ios::binary);
  if (!in) {
    why = "the cache " + settings_.cache + " cannot be read: " + std::strerror(errno);
    return std::nullopt;
  }
  std::string head;
  std::getline(in, head);
  std::string signature;
  if (std::string_view(head).starts_with(kCacheHeader))
    signature = unbase64_signature(std::string_view(head).substr(kCacheHeader.size()));
  if (signature.empty()) {
    why = "the cache " + settings_.cache + " has no signature line";
    return std::nullopt;
  }
  std::ostringstream body;
  body << in.rdbuf();
  return Document{std::move(body).str(), std::move(signature)};
}

ConfigFeed::First ConfigFeed::first(spdlog::logger& log) {
  // The cache first: its version is the floor a fetched config must reach (versions only go
  // up, across restarts too).
  std::string cache_why = "no cache is set";
  Checked from_cache;
  if (!settings_.cache.empty()) {
    if (auto doc = cached(cache_why)) {
      from_cache = check(*doc, std::nullopt);
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
      for (const auto& w : checked.warnings) log.warn("config_source: {}", w);
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

void ConfigFeed::poll_once(bool conditional) {
  std::string why, etag;
  auto fetched = fetch(conditional, why, etag);
  if (!fetched) {
    metrics_->count(Update::fetch_error);
    log_->warn("config_source: {}; version {} keeps serving", why, version_text(version_));
    return;
  }
  if (fetched->not_modified) {
    metrics_->count(Update::unchanged);
    return;
  }
  auto checked = check(*fetched, version_);
  // A refused document is not fetched again until it changes (SIGHUP asks without the ETag):
  // it would be refused again. Except for a bad signature, which may be a publisher midway
  // (the new document up, its signature not yet): that one is tried again at the next poll.
  if (checked.outcome != Update::bad_signature) etag_ = etag;
  if (!checked.config) {
    metrics_->count(checked.outcome);
    if (checked.outcome != Update::unchanged)
      log_refusal(*log_, checked, "version " + version_text(version_) + " keeps serving");
    return;
  }
  for (const auto& w : checked.warnings) log_->warn("config_source: {}", w);
  apply_(checked.config);  // recorded as in force only once it is
  metrics_->count(Update::applied);
  version_ = checked.config->version;
  sha256_ = checked.config->sha256;
  keep(*fetched, *log_);
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
    const bool asked = std::exchange(now_, false);
    lock.unlock();
    // Nothing may leave the thread (std::terminate would take the proxy down).
    try {
      poll_once(!asked);
    } catch (const std::exception& e) {
      metrics_->count(Update::fetch_error);
      log_->error("config_source: {}; version {} keeps serving", e.what(), version_text(version_));
    } catch (...) {
      metrics_->count(Update::fetch_error);
      log_->error("config_source: an unknown failure; version {} keeps serving",
                  version_text(version_));
    }
    lock.lock();
  }
}

}  // namespace floodgate::app
