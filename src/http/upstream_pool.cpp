#include "upstream_pool.hpp"

#include <sys/socket.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace floodgate::http {

namespace asio = boost::asio;
namespace beast = boost::beast;
using tcp = asio::ip::tcp;

namespace {

// An idle keep-alive connection is usable only if the upstream has neither closed it nor
// sent unsolicited bytes; a non-blocking peek tells both without consuming anything.
bool still_open(UpstreamConnection& c) {
  auto& sock = c.stream.socket();
  if (!sock.is_open() || c.buffer.size() != 0) return false;
  char byte;
  ssize_t n = ::recv(sock.native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

}  // namespace

UpstreamConnectionPtr UpstreamPool::take(const config::Upstream& u) {
  auto it = idle_.find(std::string_view(u.url));
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

void UpstreamPool::give_back(const config::Upstream& u, UpstreamConnectionPtr c) {
  auto it = idle_.find(std::string_view(u.url));
  if (it == idle_.end()) it = idle_.emplace(u.url, std::vector<UpstreamConnectionPtr>{}).first;
  if (it->second.size() >= u.max_idle_connections) return;  // closed by its destructor
  c->stream.expires_never();
  it->second.push_back(std::move(c));
}

asio::awaitable<std::pair<UpstreamConnectionPtr, boost::system::error_code>> UpstreamPool::connect(
    const config::Upstream& u) {
  auto conn = std::make_unique<UpstreamConnection>(ex_);
  boost::system::error_code ec;
  auto address = asio::ip::make_address(u.host, ec);
  conn->stream.expires_after(u.connect_timeout);
  if (!ec) {
    auto [cec] = co_await conn->stream.async_connect(tcp::endpoint(address, u.port),
                                                     asio::as_tuple(asio::use_awaitable));
    ec = cec;
  } else {
    auto [rec, results] = co_await resolver_.async_resolve(u.host, std::to_string(u.port),
                                                           asio::as_tuple(asio::use_awaitable));
    if (rec) co_return std::pair{nullptr, rec};
    auto [cec, ep] =
        co_await conn->stream.async_connect(results, asio::as_tuple(asio::use_awaitable));
    ec = cec;
  }
  if (ec) co_return std::pair{nullptr, ec};
  conn->stream.socket().set_option(tcp::no_delay(true), ec);
  co_return std::pair{std::move(conn), boost::system::error_code{}};
}

}  // namespace floodgate::http
