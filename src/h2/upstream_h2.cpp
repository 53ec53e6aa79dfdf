#include "upstream_h2.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/error.hpp>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <utility>

#include "floodgate/ascii.hpp"
#include "net/coro_names.hpp"
#include "nghttp2_util.hpp"
#include "upstream_h2_callbacks.hpp"

namespace floodgate::http {

namespace {

// The connection's receive window: what all its streams together may have buffered here
// (each stream's own is the protocol's default, 64 KiB).
constexpr std::int32_t kConnectionWindow = 1 << 20;
// A connection with no stream open is closed after this (as nginx's keepalive_timeout).
constexpr auto kIdleClose = std::chrono::seconds(60);
// Streams a connection still connecting is assumed to take (nghttp2's assumption too, until
// the origin's SETTINGS say otherwise).
constexpr std::size_t kAssumedStreams = 100;
// Times a stream looks for a connection with room before it fails (H2UpstreamPool::get).
constexpr int kMaxRounds = 8;

}  // namespace

int submit_trailers(nghttp2_session* session, std::int32_t id, H2Fields& fields) {
  H2HeaderBlock block;
  for (const auto& f : fields) block.add(f.name, f.value);
  const auto nva = block.pairs();
  return nghttp2_submit_trailer(session, id, nva.data(), nva.size());
}

H2UpstreamConnection::H2UpstreamConnection(H2UpstreamPool& pool, const config::UpstreamServer& u)
    : pool_(pool),
      ex_(pool.connector_.executor()),
      key_(u.pool_key),
      connect_timeout_(u.connect_timeout),
      ready_(ex_),
      write_wake_(ex_) {}

H2UpstreamConnection::~H2UpstreamConnection() {
  if (session_) nghttp2_session_del(session_);
}

bool H2UpstreamConnection::has_room() const {
  if (state_ == State::connecting) return waiting_ + calls_.size() < pool_.assumed_streams(key_);
  if (state_ != State::open || goaway_ || nghttp2_session_check_request_allowed(session_) == 0)
    return false;
  const auto limit =
      nghttp2_session_get_remote_settings(session_, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS);
  return calls_.size() < limit;
}

asio::awaitable<void> H2UpstreamConnection::ready() {
  while (state_ == State::connecting) {
    ready_.expires_at(asio::steady_timer::time_point::max());
    co_await ready_.async_wait(as_tuple(use_awaitable));
  }
}

asio::awaitable<void> H2UpstreamConnection::run(UpstreamPool& connector, config::UpstreamServer u) {
  {
    Watchdog connecting(ex_);
    auto got = co_await connector.connect(u, connecting);
    if (got.error) {
      why_ = got.why;
      timed_out_ = got.error == boost::beast::error::timeout;
      state_ = State::closed;
      ready_.cancel();
      co_return;
    }
    conn_ = std::move(got.conn);
  }
  if (closing_) {  // closed (a drain) while it was connecting
    state_ = State::closed;
    ready_.cancel();
    co_return;
  }
  nghttp2_session_callbacks* cb = new_upstream_callbacks();
  if (!cb) {
    why_ = "out of memory";
    state_ = State::closed;
    ready_.cancel();
    co_return;
  }
  nghttp2_option* opt = nullptr;
  nghttp2_option_new(&opt);
  // A response's window reopens only as its user takes the bytes (take()).
  nghttp2_option_set_no_auto_window_update(opt, 1);
  nghttp2_option_set_max_continuations(opt, 8);
  nghttp2_option_set_max_settings(opt, 32);
  nghttp2_option_set_max_outbound_ack(opt, 1000);
  nghttp2_session_client_new2(&session_, cb, this, opt);
  nghttp2_option_del(opt);
  nghttp2_session_callbacks_del(cb);
  nghttp2_settings_entry settings[] = {{NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
                                       {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, kMaxHeaderList}};
  nghttp2_submit_settings(session_, NGHTTP2_FLAG_NONE, settings, std::size(settings));
  nghttp2_session_set_local_window_size(session_, NGHTTP2_FLAG_NONE, 0, kConnectionWindow);
  write_watch_ = std::make_unique<Watchdog>(ex_);
  // Open once the origin's SETTINGS have arrived (below): until then its stream limit is
  // not known, and streams sent past it would be refused.
  using namespace asio::experimental::awaitable_operators;
  co_await (read_loop() && write_loop(u.response_timeout));
}

asio::awaitable<void> H2UpstreamConnection::read_loop() {
  std::vector<std::uint8_t> buf(kReadChunk);
  auto& watch = conn_->watch;
  while (nghttp2_session_want_read(session_) && state_ != State::closed && !closing_) {
    if (goaway_ && calls_.empty()) break;
    if (state_ == State::connecting)
      watch.guard(conn_->stream.socket(), connect_timeout_);  // for the origin's SETTINGS
    else
      idle_watch();
    auto [ec, n] = co_await conn_->stream.async_read_some(asio::buffer(buf.data(), buf.size()),
                                                          as_tuple(use_awaitable));
    if (ec) break;
    auto rv = nghttp2_session_mem_recv(session_, buf.data(), n);
    kick();
    if (rv < 0) break;
  }
  watch.relax();
  finish(NGHTTP2_INTERNAL_ERROR);
  if (state_ == State::connecting) why_ = "the origin sent no SETTINGS frame (is it HTTP/2?)";
  state_ = State::closed;
  ready_.cancel();  // callers waiting for the SETTINGS that never came
  boost::system::error_code ignored;
  conn_->stream.socket().close(ignored);  // the writer stops too
  kick();
}

asio::awaitable<void> H2UpstreamConnection::write_loop(std::chrono::milliseconds timeout) {
  while (state_ != State::closed) {
    outbuf_.clear();
    take_output(session_, outbuf_, kWriteBatch);
    if (!outbuf_.empty()) {
      write_watch_->guard(conn_->stream.socket(), timeout);  // an origin that stops reading
      auto [ec, n] =
          co_await asio::async_write(conn_->stream, asio::buffer(outbuf_), as_tuple(use_awaitable));
      write_watch_->relax();
      if (ec) {
        boost::system::error_code ignored;
        conn_->stream.socket().close(ignored);  // the reader ends the streams
        co_return;
      }
      continue;
    }
    write_wake_.expires_at(asio::steady_timer::time_point::max());
    co_await write_wake_.async_wait(as_tuple(use_awaitable));
  }
}

void H2UpstreamConnection::settings_received() {
  const auto limit =
      nghttp2_session_get_remote_settings(session_, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS);
  pool_.learned_[key_] = limit;  // what the next connection to this origin is assumed to take
  if (state_ != State::connecting) return;
  state_ = State::open;
  ready_.cancel();
}

void H2UpstreamConnection::idle_watch() {
  if (state_ != State::open) return;
  if (calls_.empty())
    conn_->watch.guard(conn_->stream.socket(), kIdleClose);
  else
    conn_->watch.relax();  // each stream's user times its own waits
}

void H2UpstreamConnection::finish(std::uint32_t code) {
  auto calls = std::move(calls_);
  calls_.clear();
  for (auto& [id, c] : calls) {
    c->closed = true;
    c->error = code;
    c->refused = !c->head_sent;  // its request never left: the origin cannot have seen it
    c->notify();
  }
}

bool H2UpstreamConnection::submit(const H2CallPtr& call, std::span<const nghttp2_nv> nva,
                                  bool has_body) {
  if (!has_room()) return false;
  nghttp2_data_provider provider{};
  provider.source.ptr = call.get();
  provider.read_callback = &read_upstream_body;
  auto id = nghttp2_submit_request(session_, nullptr, nva.data(), nva.size(),
                                   has_body ? &provider : nullptr, nullptr);
  if (id < 0) return false;
  call->id = id;
  calls_[id] = call;
  idle_watch();  // busy now: no idle deadline while the read is pending
  kick();
  return true;
}

void H2UpstreamConnection::resume(H2Call& c) {
  if (c.closed || state_ == State::closed || !session_) return;
  nghttp2_session_resume_data(session_, c.id);
  kick();
}

void H2UpstreamConnection::take(H2Call& c, std::size_t n) {
  // Also for a closed stream: its bytes counted against the connection's window.
  if (n == 0 || c.id < 0 || state_ == State::closed || !session_) return;
  nghttp2_session_consume(session_, c.id, n);
  kick();
}

void H2UpstreamConnection::cancel(H2Call& c) {
  take(c, c.in.size());
  c.in.clear();
  if (c.closed || c.id < 0 || state_ == State::closed || !session_) return;
  nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, c.id, NGHTTP2_CANCEL);
  kick();
}

void H2UpstreamConnection::close() {
  closing_ = true;
  if (state_ == State::closed || !conn_) return;
  boost::system::error_code ignored;
  conn_->stream.socket().close(ignored);
}

std::size_t H2UpstreamPool::assumed_streams(const std::string& key) const {
  auto it = learned_.find(key);
  return it == learned_.end() ? kAssumedStreams : std::max<std::size_t>(it->second, 1);
}

std::shared_ptr<H2UpstreamConnection> H2UpstreamPool::ready(const config::UpstreamServer& u) {
  auto it = conns_.find(u.pool_key);
  if (it == conns_.end()) return nullptr;
  auto& list = it->second;
  // A closed one goes here (its coroutines have ended or are ending; they hold it till then).
  std::erase_if(list,
                [](const auto& c) { return c->state() == H2UpstreamConnection::State::closed; });
  for (auto& c : list)
    if (c->state() == H2UpstreamConnection::State::open && c->has_room()) return c;
  return nullptr;
}

asio::awaitable<H2UpstreamPool::Got> H2UpstreamPool::get(const config::UpstreamServer& u) {
  // A connection that opens with fewer streams than were waiting for it sends the rest to
  // look again (another connection, or a new one); an origin that allows none ends this.
  for (int round = 0; round < kMaxRounds; ++round) {
    if (auto c = ready(u)) co_return Got{std::move(c)};
    auto& list = conns_[u.pool_key];
    std::shared_ptr<H2UpstreamConnection> conn;
    for (auto& c : list)
      if (c->state() == H2UpstreamConnection::State::connecting && c->has_room()) conn = c;
    if (!conn) {
      conn = std::make_shared<H2UpstreamConnection>(*this, u);
      list.push_back(conn);
      ++running_;
      asio::co_spawn(connector_.executor(), conn->run(connector_, u),
                     [this, keep = conn](std::exception_ptr) { --running_; });
    }
    ++conn->waiting_;
    co_await conn->ready();
    --conn->waiting_;
    if (conn->state() != H2UpstreamConnection::State::open)
      co_return Got{nullptr, conn->why().empty() ? "connection closed" : conn->why(),
                    conn->timed_out()};
    if (conn->has_room()) co_return Got{conn};
  }
  co_return Got{nullptr, "the origin's connections take no more streams"};
}

void H2UpstreamPool::close_all() {
  for (auto& [key, list] : conns_)
    for (auto& c : list) c->close();
  conns_.clear();
}

}  // namespace floodgate::http
