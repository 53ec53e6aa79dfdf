#include "tunnel.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http/field.hpp>

#include <array>
#include <memory>

#include "exchange/forwarding.hpp"
#include "exchange/pipeline.hpp"
#include "net/coro_names.hpp"
#include "wire.hpp"

namespace floodgate::http {

namespace {

constexpr std::size_t kChunkSize = 16 * 1024;

// Copies one direction of a tunnel until a read or write fails (EOF included).
asio::awaitable<void> pump(Transport& from, Transport& to, std::span<char> buffer,
                           std::chrono::steady_clock::time_point& last_activity) {
  for (;;) {
    auto [rec, n] = co_await from.async_read_some(asio::buffer(buffer.data(), buffer.size()),
                                                  as_tuple(use_awaitable));
    if (rec) break;
    last_activity = std::chrono::steady_clock::now();
    auto [wec, wn] =
        co_await asio::async_write(to, asio::buffer(buffer.data(), n), as_tuple(use_awaitable));
    if (wec) break;
  }
  // Ends the other direction too, even if a layer below ignored the cancellation signal.
  beast::error_code ignored;
  from.socket().cancel(ignored);
  to.socket().cancel(ignored);
}

// Completes once neither direction has moved a byte for `idle`, and stops both.
asio::awaitable<void> idle_watch(std::chrono::milliseconds idle,
                                 const std::chrono::steady_clock::time_point& last, Transport& a,
                                 Transport& b) {
  asio::steady_timer timer(co_await asio::this_coro::executor);
  for (;;) {
    timer.expires_at(last + idle);
    auto [ec] = co_await timer.async_wait(as_tuple(use_awaitable));
    if (ec) co_return;  // cancelled: the tunnel ended by itself
    if (std::chrono::steady_clock::now() >= last + idle) break;
  }
  beast::error_code ignored;
  a.socket().cancel(ignored);
  b.socket().cancel(ignored);
}

}  // namespace

asio::awaitable<void> run_tunnel(Http1Client client, ResponseHead& res, UpstreamConnection& conn,
                                 Exchange& x, metrics::Metrics& metrics) {
  using namespace asio::experimental::awaitable_operators;
  const auto idle = x.config->server.timeouts.idle;
  strip_hop_by_hop(res.fields);
  res.fields.set("Connection", "Upgrade");
  res.fields.set("Upgrade", "websocket");
  add_rate_headers(x, res.fields);
  x.status = 101;
  client.head.clear();
  append_head(client.head, res);
  // Bytes that arrived behind either head already belong to the tunnel.
  std::array<asio::const_buffer, 2> to_client{asio::buffer(client.head), conn.buffer.data()};
  client.watch.guard(client.transport.socket(), idle);
  auto [wec, wn] = co_await asio::async_write(client.transport, to_client, as_tuple(use_awaitable));
  if (wec) co_return;
  conn.buffer.consume(conn.buffer.size());
  if (client.buffer.size() > 0) {
    client.watch.guard(conn.stream.socket(), idle);
    auto [uec, un] =
        co_await asio::async_write(conn.stream, client.buffer.data(), as_tuple(use_awaitable));
    if (uec) co_return;
    client.buffer.consume(client.buffer.size());
  }
  client.watch.relax();  // the tunnel keeps its own idle clock: two directions, one deadline
  metrics.active_tunnels.fetch_add(1, std::memory_order_relaxed);
  auto last_activity = std::chrono::steady_clock::now();
  auto upstream_chunk = std::make_unique<std::array<char, kChunkSize>>();
  co_await (pump(client.transport, conn.stream, client.chunk, last_activity) ||
            pump(conn.stream, client.transport, std::span(*upstream_chunk), last_activity) ||
            idle_watch(idle, last_activity, client.transport, conn.stream));
  metrics.active_tunnels.fetch_sub(1, std::memory_order_relaxed);
}

}  // namespace floodgate::http
