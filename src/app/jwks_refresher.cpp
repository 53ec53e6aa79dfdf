#include "jwks_refresher.hpp"

#include "floodgate/config/redact.hpp"
#include "https_get.hpp"

namespace floodgate::app {

JwksRefresher::JwksRefresher(config::ConfigSource& source, metrics::Metrics& metrics,
                             std::shared_ptr<spdlog::logger> log)
    : source_(source), metrics_(metrics), log_(std::move(log)) {}

JwksRefresher::~JwksRefresher() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void JwksRefresher::start() {
  safe_tick();
  thread_ = std::thread([this] { run(); });
}

// Nothing may leave the thread (std::terminate would take the proxy down): out of
// descriptors or memory, the fetch counts as failed and is tried again later.
void JwksRefresher::safe_tick() {
  try {
    tick();
  } catch (const std::exception& e) {
    metrics_.jwks_fetches_failed.fetch_add(1, std::memory_order_relaxed);
    log_->warn("jwks: fetch failed: {}; keeping the current keys", e.what());
    due_ = std::chrono::steady_clock::now() + kRetry;
  }
}

void JwksRefresher::run() {
  std::unique_lock lock(mutex_);
  while (!stop_) {
    // A quarter of a second: how soon a token's unknown kid or a reload is noticed.
    if (wake_.wait_for(lock, std::chrono::milliseconds(250), [this] { return stop_; })) break;
    lock.unlock();
    safe_tick();
    lock.lock();
  }
}

void JwksRefresher::tick() {
  const auto config = source_.get();
  if (!config->jwt || !config->jwt->jwks) return;
  const auto& s = *config->jwt->jwks;
  const auto now = std::chrono::steady_clock::now();
  if (s.url != url_) {  // the first fetch, or a reload named another issuer
    // Another issuer's keys are not this one's: none are trusted until its own arrive.
    if (!url_.empty()) cell_.set(nullptr);
    url_ = s.url;
    kids_.clear();
    due_ = now;
  }
  // A kid the set lacks: fetch now, unless the last fetch for that reason was less than
  // kUnknownKidInterval ago (tokens with made-up kids must not make us hammer the issuer).
  if (cell_.take_refresh_request() && now - last_asked_ >= kUnknownKidInterval) {
    last_asked_ = now;
    due_ = now;
  }
  if (now < due_) return;
  const auto retry = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::min<config::Duration>(s.refresh, kRetry));
  due_ =
      now + (fetch(s) ? std::chrono::duration_cast<std::chrono::steady_clock::duration>(s.refresh)
                      : retry);
}

bool JwksRefresher::fetch(const config::JwksSettings& s) {
  const auto shown = config::redacted_url(s.url);  // its query may hold the issuer's API key
  auto fetched = https_get(s, {.target = s.target,
                               .accept = "application/json",
                               .max_body = kMaxBody,
                               .timeout = kTimeout});
  std::string why = fetched.error;
  std::variant<keys::KeySet, std::string> parsed = std::string();
  if (why.empty() && fetched.status != 200) why = "answered " + std::to_string(fetched.status);
  if (why.empty()) {
    parsed = keys::parse_jwks(fetched.body);
    if (auto* error = std::get_if<std::string>(&parsed)) why = "not a usable key set: " + *error;
  }
  if (!why.empty()) {
    metrics_.jwks_fetches_failed.fetch_add(1, std::memory_order_relaxed);
    const auto current = cell_.get();
    if (current)
      log_->warn("jwks: fetching {} failed: {}; keeping the {} key(s) fetched {} s ago", shown, why,
                 current->keys.size(),
                 std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now() -
                                                                  fetched_at_)
                     .count());
    else
      log_->warn("jwks: fetching {} failed: {}; no keys yet, so tokens it signs are refused", shown,
                 why);
    return false;
  }
  auto set = std::make_shared<const keys::KeySet>(std::get<keys::KeySet>(std::move(parsed)));
  std::string kids;
  for (const auto& k : set->keys)
    kids += (kids.empty() ? "" : ", ") + (k.kid.empty() ? "(no kid)" : k.kid);
  if (kids != kids_) {
    log_->info("jwks: {} key(s) from {} (kid {}){}", set->keys.size(), shown, kids,
               set->skipped ? "; " + std::to_string(set->skipped) + " entries not usable" : "");
    if (set->dropped)
      log_->warn(
          "jwks: {} publishes more signature keys than the {} read: the other {} are ignored "
          "(tokens signed with them are refused)",
          shown, keys::max_jwks_keys, set->dropped);
  }
  kids_ = std::move(kids);
  metrics_.jwks_fetches_ok.fetch_add(1, std::memory_order_relaxed);
  metrics_.jwks_keys.store(static_cast<std::int64_t>(set->keys.size()), std::memory_order_relaxed);
  fetched_at_ = std::chrono::system_clock::now();
  metrics_.jwks_updated_seconds.store(
      std::chrono::duration_cast<std::chrono::seconds>(fetched_at_.time_since_epoch()).count(),
      std::memory_order_relaxed);
  cell_.set(std::move(set));
  return true;
}

}  // namespace floodgate::app
