#include "upstream_pool.hpp"

#include <openssl/ssl.h>
#include <sys/socket.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "floodgate/tls/contexts.hpp"

namespace floodgate::http {

namespace asio = boost::asio;
namespace beast = boost::beast;
using tcp = asio::ip::tcp;

int status_for_upstream_error(const boost::system::error_code& ec) {
  return ec == beast::error::timeout ? 504 : 502;
}

namespace {

// Connections back in the pool for less than this are used without the peek below: an
// upstream closing a connection within a second of answering on it is rare (keep-alive
// timeouts are seconds to minutes; a last response says Connection: close), a system call
// per request is not, and a request that meets such a close is retried once when that is
// safe (see Session::forward).
constexpr auto kTrustedIdle = std::chrono::seconds(1);

// An idle keep-alive connection is usable only if the upstream has neither closed it nor
// sent unsolicited bytes; a non-blocking peek tells both without consuming anything.
bool still_open(UpstreamConnection& c) {
  auto& sock = c.stream.socket();
  if (!sock.is_open() || c.buffer.size() != 0) return false;
  if (std::chrono::steady_clock::now() - c.idle_since < kTrustedIdle) return true;
  char byte;
  ssize_t n = ::recv(sock.native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

}  // namespace

UpstreamConnectionPtr UpstreamPool::take(const config::UpstreamServer& u) {
  auto it = idle_.find(std::string_view(u.pool_key));
  if (it == idle_.end()) return nullptr;
  auto& list = it->second;
  while (!list.empty()) {
    auto c = std::move(list.back());
    list.pop_back();
    if (still_open(*c)) {
      c->reused = true;
      return c;
    }
  }
  return nullptr;
}

void UpstreamPool::give_back(const config::UpstreamServer& u, UpstreamConnectionPtr c) {
  auto it = idle_.find(std::string_view(u.pool_key));
  if (it == idle_.end()) it = idle_.emplace(u.pool_key, std::vector<UpstreamConnectionPtr>{}).first;
  if (it->second.size() >= u.max_idle_connections) return;  // closed by its destructor
  c->watch.relax();  // an idle connection has no deadline (its last user's is over)
  c->idle_since = std::chrono::steady_clock::now();
  it->second.push_back(std::move(c));
}

asio::awaitable<UpstreamPool::Connected> UpstreamPool::connect(const config::UpstreamServer& u,
                                                               Watchdog& watch) {
  auto conn = std::make_unique<UpstreamConnection>(ex_);
  auto& socket = conn->stream.socket();
  boost::system::error_code ec;
  auto address = asio::ip::make_address(u.host, ec);
  watch.guard(socket, u.connect_timeout);
  if (!ec) {
    auto [cec] = co_await socket.async_connect(tcp::endpoint(address, u.port),
                                               asio::as_tuple(asio::use_awaitable));
    ec = cec;
  } else {
    auto [rec, results] = co_await resolver_.async_resolve(u.host, std::to_string(u.port),
                                                           asio::as_tuple(asio::use_awaitable));
    if (rec) co_return Connected{nullptr, rec, rec.message()};
    watch.guard(socket, u.connect_timeout);
    auto [cec, ep] =
        co_await asio::async_connect(socket, results, asio::as_tuple(asio::use_awaitable));
    ec = cec;
  }
  ec = watch.translate(ec);
  if (!ec) socket.set_option(tcp::no_delay(true), ec);
  std::string why;
  if (!ec && u.tls) {
    SSL* ssl = tls::new_client_connection(u.tls_context.get(), u.host);
    if (!ssl) {
      ec = asio::error::no_memory;
    } else {
      // An h2 upstream over TLS is asked for h2 by ALPN, and must agree (RFC 9113 3.2).
      static constexpr unsigned char kH2[] = {2, 'h', '2'};
      if (u.protocol == config::UpstreamProtocol::h2) SSL_set_alpn_protos(ssl, kH2, sizeof kH2);
      conn->stream.start_tls(ssl);
      watch.guard(socket, u.connect_timeout);
      auto [hec] = co_await conn->stream.tls().async_handshake(asio::ssl::stream_base::client,
                                                               asio::as_tuple(asio::use_awaitable));
      ec = watch.translate(hec);
      if (ec) {
        why = tls::verify_failure(conn->stream.tls_handle());
        why = "TLS handshake: " + (why.empty() ? ec.message() : "certificate: " + why);
      } else if (u.protocol == config::UpstreamProtocol::h2) {
        const unsigned char* alpn = nullptr;
        unsigned alpn_len = 0;
        SSL_get0_alpn_selected(conn->stream.tls_handle(), &alpn, &alpn_len);
        if (std::string_view(reinterpret_cast<const char*>(alpn), alpn_len) != "h2") {
          ec = asio::error::no_protocol_option;
          why = "TLS handshake: the origin did not agree to h2 by ALPN";
        }
      }
    }
  }
  watch.relax();  // conn may be destroyed below; the caller guards what it does next
  if (ec) co_return Connected{nullptr, ec, why.empty() ? ec.message() : why};
  co_return Connected{std::move(conn), {}, {}};
}

}  // namespace floodgate::http
