#include "sentinel.hpp"

#include "floodgate/store/redis_blocking_client.hpp"

#include <hiredis/hiredis.h>

#include <algorithm>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <charconv>

namespace floodgate::store::redis {

namespace asio = boost::asio;

SentinelLocator::SentinelLocator(asio::io_context& ioc, std::vector<NodeAddress> sentinels,
                                 std::string master_name, RedisAccess access,
                                 std::chrono::milliseconds timeout, spdlog::logger& log)
    : ioc_(ioc), master_name_(std::move(master_name)), timeout_(timeout) {
  for (auto& s : sentinels) {
    ConnectionOptions o;
    o.host = s.host;
    o.port = s.port;
    o.access = access;
    sentinels_.push_back(std::make_shared<Connection>(ioc, o, log));
  }
}

std::shared_ptr<SentinelLocator> SentinelLocator::make(asio::io_context& ioc,
                                                       const std::vector<std::string>& sentinels,
                                                       std::string master_name, RedisAccess access,
                                                       spdlog::logger& log) {
  std::vector<NodeAddress> at;
  for (const auto& s : sentinels)
    if (auto a = parse_node_address(s)) at.push_back(std::move(*a));
  return std::make_shared<SentinelLocator>(ioc, std::move(at), std::move(master_name),
                                           std::move(access), kAskTimeout, log);
}

SentinelLocator::~SentinelLocator() {
  stop();
}

void SentinelLocator::start() {
  for (auto& s : sentinels_) s->start();
}

void SentinelLocator::stop() {
  for (auto& s : sentinels_) s->stop();
}

void SentinelLocator::locate(Found found) {
  auto shared = std::make_shared<Found>(std::move(found));
  asio::post(ioc_, [w = weak_from_this(), shared] {
    if (auto self = w.lock())
      self->first_ask(shared, std::chrono::steady_clock::now() + self->timeout_);
  });
}

// At start (and after every sentinel dropped) none is connected yet: wait for one, a little,
// rather than fail the master's first attempt and start its backoff.
void SentinelLocator::first_ask(std::shared_ptr<Found> found,
                                std::chrono::steady_clock::time_point until) {
  const bool any = std::any_of(sentinels_.begin(), sentinels_.end(),
                               [](const auto& s) { return s->connected(); });
  if (any || std::chrono::steady_clock::now() >= until) return ask(0, std::move(found), "");
  auto timer = std::make_shared<asio::steady_timer>(ioc_, std::chrono::milliseconds(20));
  timer->async_wait([w = weak_from_this(), found, until, timer](boost::system::error_code) {
    if (auto self = w.lock()) self->first_ask(found, until);
  });
}

namespace {

// "*2 $host $port": the master's address, checked like a cluster's node names.
std::optional<NodeAddress> address_in(const redisReply* r, std::string& why) {
  if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
      r->element[0]->type != REDIS_REPLY_STRING || r->element[1]->type != REDIS_REPLY_STRING) {
    why = r && r->type == REDIS_REPLY_NIL     ? "does not know the master's name"
          : r && r->type == REDIS_REPLY_ERROR ? "refused: " + std::string(r->str, r->len)
                                              : "answered something that is not an address";
    return std::nullopt;
  }
  long long port = 0;
  const auto* p = r->element[1];
  auto [end, ec] = std::from_chars(p->str, p->str + p->len, port);
  std::optional<NodeAddress> a;
  if (ec == std::errc() && end == p->str + p->len)
    a = make_node_address(std::string_view(r->element[0]->str, r->element[0]->len), port);
  if (!a) why = "named an address that does not parse";
  return a;
}

}  // namespace

}  // namespace floodgate::store::redis

bool floodgate::store::master_address_of(const redisReply* reply, std::string& host,
                                         std::uint16_t& port, std::string& why) {
  auto at = redis::address_in(reply, why);
  if (!at) return false;
  host = std::move(at->host);
  port = at->port;
  return true;
}

namespace floodgate::store::redis {

void SentinelLocator::ask(std::size_t i, std::shared_ptr<Found> found, std::string why) {
  for (; i < sentinels_.size(); ++i) {
    auto& s = sentinels_[i];
    if (!s->connected()) continue;
    const auto deadline = std::chrono::steady_clock::now() + timeout_;
    auto on_reply = [w = weak_from_this(), i, found, conn = std::weak_ptr(s)](
                        const redisReply* r, CommandStatus status) {
      auto self = w.lock();
      auto sentinel = conn.lock();
      if (!self || !sentinel) return;
      std::string why;
      auto master = status == CommandStatus::ok ? address_in(r, why) : std::nullopt;
      if (status != CommandStatus::ok)
        why = status == CommandStatus::timeout ? "did not answer in time" : "dropped";
      // A stalled sentinel is cut off (and reconnects), so it does not cost every later ask
      // its whole timeout while it stays first.
      if (status == CommandStatus::timeout) sentinel->reset();
      if (!master) {
        self->ask(i + 1, found, "sentinel " + sentinel->name() + " " + why);
        return;
      }
      // The one that knew is asked first next time.
      std::rotate(self->sentinels_.begin(), self->sentinels_.begin() + static_cast<long>(i),
                  self->sentinels_.begin() + static_cast<long>(i) + 1);
      (*found)(std::move(master), "");
    };
    if (s->command({"SENTINEL", "GET-MASTER-ADDR-BY-NAME", master_name_}, deadline,
                   std::move(on_reply)))
      return;
  }
  (*found)(std::nullopt, why.empty() ? "no sentinel is reachable" : why);
}

}  // namespace floodgate::store::redis
