#include "acceptors.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <system_error>
#include <utility>

#include "floodgate/tls/contexts.hpp"
#include "net/coro_names.hpp"
#include "net/report_exception.hpp"
#include "session.hpp"

namespace floodgate::http {

using reuse_port = asio::detail::socket_option::boolean<SOL_SOCKET, SO_REUSEPORT>;

// Opens an SO_REUSEPORT acceptor for server.listen[index]; every worker binds the same
// port and the kernel spreads connections across them. Returns the bound port.
std::uint16_t Acceptors::listen(tcp::endpoint ep, std::size_t index,
                                const config::Listener& listener, bool rls) {
  auto& entry = list_.emplace_back(ioc_, index, listener, rls);
  auto& acc = entry.acceptor;
  boost::system::error_code ec;
  acc.open(ep.protocol(), ec);
  if (!ec) acc.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) acc.set_option(reuse_port(true), ec);
  if (!ec && ep.address().is_v6()) acc.set_option(asio::ip::v6_only(false), ec);
  if (!ec) acc.bind(ep, ec);
  if (!ec) acc.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    auto text = ep.address().to_string() + ":" + std::to_string(ep.port());
    throw std::system_error(ec, "cannot listen on " + text);
  }
  const auto port = acc.local_endpoint().port();
  if (!rls && listener.tls && listener.speaks(config::Protocol::h3)) {
    entry.alt_svc = "h3=\":" + std::to_string(port) + "\"; ma=86400";
    entry.protocols.alt_svc = entry.alt_svc;
  }
  return port;
}

// The certificates a new connection gets: the current snapshot's for this listener, so
// that a reload (SIGHUP) replaces them for new connections while open ones keep theirs.
// A reload that changed the listeners themselves takes effect at restart: until then the
// certificates loaded at start stay.
std::shared_ptr<const tls::ServerContexts> Acceptors::tls_for(const Acceptor& a) const {
  if (!a.tls) return nullptr;
  auto cfg = config_.get();
  const auto& listen = a.protocols.rls ? cfg->rls.listen : cfg->server.listen;
  if (a.index < listen.size() && listen[a.index].address.to_string() == a.address &&
      listen[a.index].tls && listen[a.index].tls->contexts)
    return listen[a.index].tls->contexts;
  return a.started_with;
}

// False when a drain closed the acceptor meanwhile.
asio::awaitable<bool> Acceptors::pause(asio::steady_timer& timer, std::chrono::milliseconds d,
                                       const tcp::acceptor& acc) {
  timer.expires_after(d);
  co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
  co_return acc.is_open();
}

asio::awaitable<void> Acceptors::accept_loop(Acceptor& entry) {
  auto& acc = entry.acceptor;
  auto& timer = entry.pause;
  entry.looping = true;
  // stop_when_idle waits for this too: a frame left suspended would be destroyed with the
  // io_context, after w_.
  struct Ended {
    bool& looping;
    ~Ended() { looping = false; }
  } ended{entry.looping};
  bool full = false;
  for (;;) {
    // At the cap new connections wait in the kernel's listen queue, neither refused nor
    // accepted and dropped, until a session ends.
    if (connections_.full(max_connections())) {
      if (!std::exchange(full, true)) note_full();
      if (!co_await pause(timer, kFullPoll, acc)) co_return;
      continue;
    }
    full = false;
    auto [ec, socket] = co_await acc.async_accept(asio::as_tuple(asio::use_awaitable));
    if (ec == asio::error::operation_aborted || !acc.is_open()) co_return;
    if (ec) {
      if (!co_await pause(timer, accept_failed(ec), acc)) co_return;
      continue;
    }
    // Another worker may have taken the last slot since the check: this connection then
    // waits, accepted but unread, for the next free one.
    auto slot = connections_.try_take(max_connections());
    while (!slot) {
      if (!co_await pause(timer, kFullPoll, acc)) co_return;
      slot = connections_.try_take(max_connections());
    }
    socket.set_option(tcp::no_delay(true), ec);
    // The slot lives in the completion handler, which lives exactly as long as the session.
    asio::co_spawn(ioc_, run_session(std::move(socket), tls_for(entry), entry.protocols, w_),
                   [report = log_exceptions(w_.log, w_.metrics, "session"),
                    slot = std::move(slot)](std::exception_ptr e) { report(e); });
  }
}

void Acceptors::note_full() {
  w_.metrics.count(metrics::Metrics::AcceptPause::max_connections);
  if (auto quiet = full_log_.allow(); quiet >= 0)
    w_.log.warn(
        "server.max_connections ({}) reached: new connections wait until one closes ({} "
        "similar lines suppressed)",
        max_connections(), quiet);
}

// Out of descriptors (EMFILE, ENFILE) or kernel memory, the connection stays queued and
// the listening socket readable: accepting again at once would spin (and log) for nothing.
// Any other error belongs to one connection.
std::chrono::milliseconds Acceptors::accept_failed(const boost::system::error_code& ec) {
  namespace errc = boost::system::errc;
  const bool resources = ec == errc::too_many_files_open ||
                         ec == errc::too_many_files_open_in_system || ec == errc::no_buffer_space ||
                         ec == errc::not_enough_memory;
  if (resources) w_.metrics.count(metrics::Metrics::AcceptPause::resources);
  if (auto quiet = accept_log_.allow(); quiet >= 0)
    w_.log.warn("accept failed: {}{} ({} similar lines suppressed)", ec.message(),
                resources ? ": accepting again in 100ms" : "", quiet);
  return resources ? kResourcePause : kErrorPause;
}

void Acceptors::start() {
  for (auto& entry : list_)
    asio::co_spawn(ioc_, accept_loop(entry), log_exceptions(w_.log, w_.metrics, "acceptor"));
}

void Acceptors::close() {
  for (auto& entry : list_) {
    boost::system::error_code ignored;
    entry.acceptor.close(ignored);
    entry.pause.cancel();  // a paused loop sees the acceptor closed and ends
  }
}

bool Acceptors::looping() const {
  return std::any_of(list_.begin(), list_.end(), [](const Acceptor& a) { return a.looping; });
}

}  // namespace floodgate::http
