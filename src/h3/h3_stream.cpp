// One HTTP/3 stream through the pipeline: the head into the exchange, route, limits, then
// either a reply of ours or the request taken to its upstream by the proxy driver
// (proxy.hpp) through the stream's Front (h3_front.hpp). As h2/h2_stream.cpp, to the letter of
// the contract: SPEC's HTTP/2 rules apply to HTTP/3 streams as written.

#include <nghttp3/nghttp3.h>

#include <optional>

#include "exchange/forwarding.hpp"
#include "exchange/pipeline.hpp"
#include "exchange/proxy.hpp"
#include "h3_connection.hpp"
#include "h3_front.hpp"
#include "net/changed_on.hpp"
#include "net/coro_names.hpp"

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"  // see h2/h2_stream.cpp
#endif

namespace floodgate::http {

void H3Connection::take_head(H3Stream& s) {
  auto& x = s.x;
  w_.open(x, w_.snapshot());  // a reload applies to the streams that start after it
  x.fields = &s.head.fields;
  if (!s.cookies.empty()) s.head.fields.set("Cookie", s.cookies);
  x.method = s.method;
  x.raw_target = s.path;
  x.host_field = s.authority.empty() ? s.head.fields.get("host") : std::string_view(s.authority);
  x.peer_ip = peer_ip_;
  x.peer = peer_;
  x.tls = true;
  if (!fingerprints_.ja4.empty()) x.tls_fingerprints = &fingerprints_;
  x.protocol = "h3";
  w_.identify(x);
}

asio::awaitable<void> H3Connection::serve(std::shared_ptr<H3Stream> sp) {
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
                                       s.header_bytes, max_header_bytes_))
    reply = Reply{status};
  if (!reply) {
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
  } else {
    // Held until the response ends: an open stream counts against a concurrency limit, and
    // a counting limit charges by the status it ends with.
    FinishGuard finish(w_.gate, x);
    H3Front front(*this, s);
    const auto done = co_await w_.proxy.forward(front, x, config.upstream_of(*x.route));
    if (done.answer != 0 && !s.closed) {
      if (s.responded)
        reset(s, NGHTTP3_H3_INTERNAL_ERROR);
      else
        submit_reply(s, Reply{done.answer});
    }
  }
  // nghttp3 reads the rest of the body and sends the response until the stream closes; a
  // client that takes none of it for the idle timeout gets the stream reset.
  while (!s.closed)
    if (!co_await changed_on(s.wake, config.server.timeouts.idle)) stalled(s);
  w_.close(x);
}

}  // namespace floodgate::http
