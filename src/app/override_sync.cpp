#include "override_sync.hpp"

#include <hiredis/hiredis.h>

#include <algorithm>
#include <charconv>

#include "stores.hpp"

namespace floodgate::app {

namespace {

constexpr std::chrono::seconds kConnectTimeout{1};
constexpr std::chrono::seconds kCommandTimeout{2};

// "MOVED 3999 10.0.0.2:7001": the slot's owner.
std::optional<config::Endpoint> moved_to(const redisReply* r) {
  if (!r || r->type != REDIS_REPLY_ERROR) return std::nullopt;
  std::string_view text(r->str, r->len);
  if (text.substr(0, 6) != "MOVED ") return std::nullopt;
  auto space = text.find(' ', 6);
  if (space == std::string_view::npos) return std::nullopt;
  auto parsed = config::parse_endpoint(text.substr(space + 1));
  if (auto* e = std::get_if<config::Endpoint>(&parsed)) return *e;
  return std::nullopt;
}

std::string field_of(const std::string& limit, const std::string& caller) {
  return limit + "\n" + caller;
}

}  // namespace

RedisOverrides::RedisOverrides(const config::StoreSettings& store, limit::OverrideBoard& board,
                               const limit::Clock& clock, std::shared_ptr<spdlog::logger> log)
    : store_(store),
      board_(board),
      clock_(clock),
      log_(std::move(log)),
      hash_(store.key_prefix + ":{overrides}"),
      version_key_(store.key_prefix + ":{overrides}:version"),
      resets_(store.key_prefix + ":{overrides}:resets"),
      client_(redis_access(store.redis), *log_, kConnectTimeout) {
  if (!store.redis.sentinels.empty())
    sentinels_.emplace(sentinel_access(store.redis), *log_, kConnectTimeout);
}

RedisOverrides::~RedisOverrides() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  if (poller_.joinable()) poller_.join();
}

void RedisOverrides::start(std::chrono::milliseconds every) {
  // The first read too: a store that does not answer must not hold up the start.
  poller_ = std::thread([this, every] { poll(every); });
}

void RedisOverrides::poll(std::chrono::milliseconds every) {
  std::unique_lock lock(mutex_);
  std::string first;
  if (!refresh(true, first)) {
    failing_ = true;
    log_->warn("overrides: cannot read them from the store yet: {}", first);
  }
  while (!wake_.wait_for(lock, every, [this] { return stop_; })) {
    std::string why;
    const bool ok = refresh(false, why);
    // A line when reading starts or stops failing, not one every half second.
    if (!ok && !failing_) log_->warn("overrides: cannot read them from the store: {}", why);
    if (ok && failing_) log_->info("overrides: read from the store again");
    failing_ = !ok;
  }
}

RedisOverrides::Reply RedisOverrides::command(const std::vector<std::string>& args,
                                              std::string& why) {
  std::vector<config::Endpoint> candidates;
  if (store_.backend == config::StoreBackend::redis_cluster)
    candidates = store_.redis.nodes;
  else if (!sentinels_)
    candidates.push_back(store_.redis.address);
  for (int attempt = 0; attempt < 3; ++attempt) {
    if (sentinels_ && !at_) {  // asked again after every failure: a failover moves the master
      auto m = master(why);
      if (!m) return nullptr;
      candidates.assign(1, *m);
    }
    Reply r;
    if (at_) r = client_.command(at_->host, at_->port, args, kCommandTimeout, why);
    // No node yet, or it did not answer: the configured ones in turn.
    for (std::size_t i = 0; !r && i < candidates.size(); ++i)
      if ((r = client_.command(candidates[i].host, candidates[i].port, args, kCommandTimeout, why)))
        at_ = candidates[i];
    if (!r) {
      at_.reset();
      continue;  // once more on fresh connections
    }
    if (auto owner = moved_to(r.get())) {  // a cluster: the slot lives elsewhere
      at_ = *owner;
      continue;
    }
    if (r->type == REDIS_REPLY_ERROR) {
      why = std::string("the store refused: ") + std::string(r->str, r->len);
      // A master demoted by a failover: the sentinels name the new one next time.
      if (why.find("READONLY") != std::string::npos) at_.reset();
      return nullptr;
    }
    return r;
  }
  if (why.empty()) why = "too many redirections";
  return nullptr;
}

std::optional<config::Endpoint> RedisOverrides::master(std::string& why) {
  std::string refused;
  for (const auto& s : store_.redis.sentinels) {
    auto r = sentinels_->command(s.host, s.port,
                                 {"SENTINEL", "GET-MASTER-ADDR-BY-NAME", store_.redis.master_name},
                                 kCommandTimeout, refused);
    config::Endpoint master;
    if (r && store::master_address_of(r.get(), master.host, master.port, refused)) return master;
  }
  why = "no sentinel named the master " + store_.redis.master_name +
        (refused.empty() ? std::string() : " (" + refused + ")");
  return std::nullopt;
}

bool RedisOverrides::refresh(bool force, std::string& why) {
  auto v = command({"GET", version_key_}, why);
  if (!v) return false;
  const std::string version = v->type == REDIS_REPLY_STRING ? std::string(v->str, v->len) : "0";
  if (!force && version == seen_) return true;
  auto all = command({"HGETALL", hash_}, why);
  if (!all) return false;
  limit::OverrideList list;
  std::vector<std::pair<std::string, std::string>> lapsed;
  const auto now = clock_.now();
  if (all->type == REDIS_REPLY_ARRAY)
    for (std::size_t i = 0; i + 1 < all->elements; i += 2) {
      const auto* f = all->element[i];
      const auto* val = all->element[i + 1];
      if (f->type != REDIS_REPLY_STRING || val->type != REDIS_REPLY_STRING) continue;
      std::string bad;
      auto o = limit::override_from_json(std::string_view(val->str, val->len), bad);
      if (!o) {
        log_->warn("overrides: field {} of {} is not an override ({}); ignored",
                   std::string(f->str, f->len), hash_, bad);
        continue;
      }
      if (!o->live(now)) {
        lapsed.emplace_back(std::string(f->str, f->len), std::string(val->str, val->len));
        continue;
      }
      list.push_back(std::move(*o));
    }
  std::sort(list.begin(), list.end(), [](const auto& a, const auto& b) {
    return std::tie(a.limit, a.caller) < std::tie(b.limit, b.caller);
  });
  // Keys reset lately: a deny cache remembers a refusal for as long as its Retry-After, and
  // every worker forgets these whenever the version moves.
  auto reset_keys = command({"HGETALL", resets_}, why);
  if (!reset_keys) return false;
  std::vector<std::string> resets;
  std::vector<std::pair<std::string, std::string>> stale;
  constexpr limit::Micros kKeepResets = 600 * limit::kMicrosPerSecond;
  if (reset_keys->type == REDIS_REPLY_ARRAY)
    for (std::size_t i = 0; i + 1 < reset_keys->elements; i += 2) {
      const auto* k = reset_keys->element[i];
      const auto* at = reset_keys->element[i + 1];
      if (k->type != REDIS_REPLY_STRING || at->type != REDIS_REPLY_STRING) continue;
      long long ms = 0;
      std::from_chars(at->str, at->str + at->len, ms);
      if (now - ms * 1000 > kKeepResets)
        stale.emplace_back(std::string(k->str, k->len), std::string(at->str, at->len));
      else
        resets.emplace_back(k->str, k->len);
    }
  board_.publish(std::move(list), std::move(resets));
  delete_unchanged(resets_, stale);
  seen_ = version;
  delete_unchanged(hash_, lapsed);  // tidied by whichever instance sees them first
  return true;
}

void RedisOverrides::delete_unchanged(
    const std::string& hash, const std::vector<std::pair<std::string, std::string>>& fields) {
  // Compare and delete in one step: a plain HDEL after the read would delete an override
  // another instance PUT in between.
  static const std::string kScript =
      "if redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] then "
      "return redis.call('HDEL', KEYS[1], ARGV[1]) end return 0";
  std::string ignored;  // best effort: the next read tidies what this one could not
  for (const auto& [field, value] : fields)
    command({"EVAL", kScript, "1", hash, field, value}, ignored);
}

std::string RedisOverrides::put(const limit::CallerOverride& o) {
  std::lock_guard lock(mutex_);
  std::string why;
  if (!command({"HSET", hash_, field_of(o.limit, o.caller), limit::to_json(o)}, why) ||
      !command({"INCR", version_key_}, why))
    return why;
  refresh(true, why);  // this instance applies it at once; the others at their next read
  return "";
}

std::string RedisOverrides::reset(const std::string& store_key) {
  std::lock_guard lock(mutex_);
  std::string why;
  if (!command({"HSET", resets_, store_key, std::to_string(clock_.now() / 1000)}, why) ||
      !command({"INCR", version_key_}, why))
    return why;
  return "";
}

std::string RedisOverrides::remove(const std::string& limit, const std::string& caller,
                                   bool& found) {
  std::lock_guard lock(mutex_);
  std::string why;
  auto r = command({"HDEL", hash_, field_of(limit, caller)}, why);
  if (!r) return why;
  found = r->type == REDIS_REPLY_INTEGER && r->integer > 0;
  if (!found) return "";
  if (!command({"INCR", version_key_}, why)) return why;
  refresh(true, why);
  return "";
}

}  // namespace floodgate::app
