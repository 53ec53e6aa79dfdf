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
  take_head(*sp);
  co_await serve_stream<H2Front>(*this, w_, *sp, sp->x.config->server.max_header_bytes, service_);
}

}  // namespace floodgate::http
