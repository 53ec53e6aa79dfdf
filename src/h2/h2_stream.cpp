// One HTTP/2 stream through the pipeline: the head into the exchange, route, limits, then
// either a reply of ours or the request taken to its upstream by the proxy driver
// (proxy.hpp) through the stream's Front (h2_front.hpp).

#include <nghttp2/nghttp2.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include <optional>

#include "exchange/forwarding.hpp"
#include "exchange/pipeline.hpp"
#include "exchange/proxy.hpp"
#include "h2_connection.hpp"
#include "h2_front.hpp"
#include "net/coro_names.hpp"

// GCC 12 reports Asio's coroutine frames as freed by a mismatched operator delete once it
// inlines enough of them into one function (this file's): they are allocated and freed by
// the pair in awaitable_frame_base, through Asio's recycling allocator. A false positive.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif

namespace floodgate::http {

// Not a coroutine of its own: the caller awaits changed_on's.
asio::awaitable<bool> changed(H2Stream& s, std::chrono::milliseconds timeout) {
  return changed_on(s.wake, timeout);
}

void H2Connection::take_head(H2Stream& s) {
  auto& x = s.x;
  w_.open(x, w_.snapshot());  // a reload applies to the streams that start after it
  x.fields = &s.head.fields;
  if (!s.cookies.empty()) s.head.fields.set("Cookie", s.cookies);
  x.method = s.method;
  x.raw_target = s.path;
  x.host_field = s.authority.empty() ? s.head.fields.get("host") : std::string_view(s.authority);
  x.peer_ip = peer_ip_;
  x.peer = peer_;
  x.tls = client_.is_tls();
  x.tls_fingerprints = client_.fingerprints();
  x.protocol = "h2";
  x.alt_svc = alt_svc_;
  w_.identify(x);
}

asio::awaitable<void> H2Connection::serve(std::shared_ptr<H2Stream> sp) {
  auto& s = *sp;
  auto& x = s.x;
  ++w_.in_flight;
  struct InFlight {
    std::uint64_t& n;
    ~InFlight() { --n; }
  } in_flight{w_.in_flight};
  take_head(s);
  const auto& config = *x.config;
  std::optional<Reply> reply;
  if (int status = refused_stream_head(s.method, s.extended_connect, s.authority, s.head.fields,
                                       s.header_bytes, config.server.max_header_bytes))
    reply = Reply{status};
  if (service_ && !reply) {
    H2Front front(*this, s);
    co_await service_->serve(front, x);
  } else if (!reply) {
    if (auto unrouted = route_exchange(x))
      reply = Reply{unrouted->status};
    else if (s.closed)
      co_return;  // reset before anything was decided: nothing is charged
    else if (gated(x))
      reply = co_await decide_exchange(w_.gate, x, w_.log);
    else
      count_ungated(w_.gate, x);
  }

  if (reply) {
    submit_reply(s, *reply);
  } else if (!service_) {
    // Held until the response ends: an open stream counts against a concurrency limit, and
    // a counting limit charges by the status it ends with.
    FinishGuard finish(w_.gate, x);
    H2Front front(*this, s);
    const auto done = co_await w_.proxy.forward(front, x, config.upstream_of(*x.route));
    if (done.answer != 0 && !s.closed) {
      if (s.responded)
        reset(s, NGHTTP2_INTERNAL_ERROR, ResetCause::upstream);
      else
        submit_reply(s, Reply{done.answer});
    }
  }
  // nghttp2 reads the body through `s` until the stream closes; a client that takes none of
  // it for the idle timeout gets the stream reset.
  while (!s.closed)
    if (!co_await changed(s, config.server.timeouts.idle)) stalled(s);
  w_.close(x);
}

}  // namespace floodgate::http
