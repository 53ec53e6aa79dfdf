#include "quic_listeners.hpp"

#include <boost/asio/co_spawn.hpp>

#include <algorithm>
#include <system_error>

#include "floodgate/tls/contexts.hpp"
#include "net/coro_names.hpp"
#include "net/report_exception.hpp"

namespace floodgate::http {

using udp = asio::ip::udp;
using reuse_port = asio::detail::socket_option::boolean<SOL_SOCKET, SO_REUSEPORT>;

void QuicListeners::listen(udp::endpoint ep, std::size_t index, const config::Listener& l) {
  udp::socket socket(ioc_);
  boost::system::error_code ec;
  socket.open(ep.protocol(), ec);
  if (!ec) socket.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) socket.set_option(reuse_port(true), ec);
  if (!ec && ep.address().is_v6()) socket.set_option(asio::ip::v6_only(false), ec);
  // Room for bursts of datagrams while the worker is busy (handshakes cost CPU): asked for
  // 4 MiB, the kernel gives what net.core.rmem_max allows.
  if (!ec) socket.set_option(asio::socket_base::receive_buffer_size(4 << 20), ec);
  if (!ec) socket.bind(ep, ec);
  if (ec) {
    auto text = ep.address().to_string() + ":" + std::to_string(ep.port());
    throw std::system_error(ec, "cannot listen on " + text + "/udp (h3)");
  }
  endpoints_.emplace_back(std::move(socket), worker_, secret_, index, l.tls->quic, w_,
                          connections_);
}

void QuicListeners::start() {
  for (auto& e : endpoints_)
    asio::co_spawn(ioc_, e.run(), log_exceptions(w_.log, w_.metrics, "http3 endpoint"));
}

void QuicListeners::close() {
  for (auto& e : endpoints_) e.close();
}

bool QuicListeners::looping() const {
  return std::any_of(endpoints_.begin(), endpoints_.end(),
                     [](const QuicEndpoint& e) { return e.looping(); });
}

}  // namespace floodgate::http
