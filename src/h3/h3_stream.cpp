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
  take_head(*sp);
  co_await serve_stream<H3Front>(*this, w_, *sp, max_header_bytes_, nullptr);
}

}  // namespace floodgate::http
