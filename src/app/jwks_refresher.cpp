#include "jwks_refresher.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>

#include "floodgate/config/redact.hpp"
#include "floodgate/tls/contexts.hpp"

namespace floodgate::app {

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = beast::http;
using tcp = asio::ip::tcp;
using asio::as_tuple;
using asio::use_awaitable;

struct Fetched {
  int status = 0;
  std::string body;
  std::string error;  // empty: an answer came
};

constexpr std::size_t kMaxBody = 1 << 20;  // a JWKS is a few KiB

asio::awaitable<void> get(const config::JwksSettings& s, Fetched& out) {
  auto ex = co_await asio::this_coro::executor;
  tcp::resolver resolver(ex);
  auto [rec, endpoints] = co_await resolver.async_resolve(s.host, s.port, as_tuple(use_awaitable));
  if (rec) {
    out.error = "cannot resolve " + s.host + ": " + rec.message();
    co_return;
  }
  tcp::socket socket(ex);
  auto [cec, ep] = co_await asio::async_connect(socket, endpoints, as_tuple(use_awaitable));
  if (cec) {
    out.error = "cannot connect: " + cec.message();
    co_return;
  }
  SSL* ssl = tls::new_client_connection(s.client.get(), s.host);
  if (!ssl) {
    out.error = "cannot start TLS";
    co_return;
  }
  asio::ssl::stream<tcp::socket&> stream(socket, ssl);  // owns ssl from here
  auto [hec] =
      co_await stream.async_handshake(asio::ssl::stream_base::client, as_tuple(use_awaitable));
  if (hec) {
    auto why = tls::verify_failure(ssl);
    out.error = "TLS handshake failed: " + (why.empty() ? hec.message() : why);
    co_return;
  }
  bhttp::request<bhttp::empty_body> req{bhttp::verb::get, s.target, 11};
  const auto host = s.host.find(':') == std::string::npos ? s.host : "[" + s.host + "]";
  req.set(bhttp::field::host, s.port == "443" ? host : host + ":" + s.port);
  req.set(bhttp::field::user_agent, "floodgate");
  req.set(bhttp::field::accept, "application/json");
  req.set(bhttp::field::connection, "close");
  auto [wec, written] = co_await bhttp::async_write(stream, req, as_tuple(use_awaitable));
  if (wec) {
    out.error = "cannot send: " + wec.message();
    co_return;
  }
  beast::flat_buffer buffer;
  bhttp::response_parser<bhttp::string_body> parser;
  parser.body_limit(kMaxBody);
  auto [rdec, read] = co_await bhttp::async_read(stream, buffer, parser, as_tuple(use_awaitable));
  if (rdec) {
    out.error = "cannot read the answer: " + rdec.message();
    co_return;
  }
  out.status = parser.get().result_int();
  out.body = std::move(parser.get().body());
}

// One GET within `timeout`, connect to body.
Fetched https_get(const config::JwksSettings& s, std::chrono::milliseconds timeout) {
  asio::io_context ioc;
  Fetched out;
  bool done = false;
  asio::co_spawn(ioc, get(s, out), [&](std::exception_ptr e) {
    done = true;
    if (e) out.error = "unexpected failure";
  });
  ioc.run_for(timeout);
  if (!done)
    out.error = "no answer within " +
                std::to_string(std::chrono::duration_cast<std::chrono::seconds>(timeout).count()) +
                " s";
  return out;
}

}  // namespace

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
  auto fetched = https_get(s, kTimeout);
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
