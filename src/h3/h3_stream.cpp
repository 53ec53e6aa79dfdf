// What an HTTP/3 connection does for its streams: each one's head into its exchange and
// through the shared pipeline (serve_stream), replies of ours, the response handed to nghttp3,
// the QUIC windows reopened, resets and their budget. One HTTP/3 stream through the pipeline: the
// head into the exchange, route, limits, then either a reply of ours or the request taken to its
// upstream by the proxy driver (proxy.hpp) through the stream's Front (h3_front.hpp). As
// h2/h2_stream.cpp, to the letter of the contract: SPEC's HTTP/2 rules apply to HTTP/3 streams as
// written.

#include <nghttp3/nghttp3.h>

#include <optional>

#include <boost/asio/co_spawn.hpp>
#include <boost/container/small_vector.hpp>

#include "exchange/forwarding.hpp"
#include "exchange/grpc.hpp"
#include "exchange/pipeline.hpp"
#include "exchange/proxy.hpp"
#include "h3_callbacks.hpp"
#include "h3_connection.hpp"
#include "h3_front.hpp"
#include "net/changed_on.hpp"
#include "net/coro_names.hpp"
#include "net/report_exception.hpp"

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

void H3Connection::start_stream(std::shared_ptr<H3Stream> s) {
  ++tasks_;
  asio::co_spawn(
      timer_.get_executor(), serve(s),
      [this, s, report = log_exceptions(w_.log, w_.metrics, "http3 stream")](std::exception_ptr e) {
        report(e);
        stream_task_ended(*s);
      });
}

void H3Connection::stream_task_ended(H3Stream& s) {
  s.task_done = true;
  --tasks_;
  if (s.closed) {
    const auto id = s.id;
    // ngtcp2 closed it while the coroutine ran: the stream it stood for is free now.
    if (streams_.erase(id) > 0 && !done_) extend_streams();
  }
  if (tasks_ == 0) tasks_done_.cancel();
  kick();
}

void H3Connection::extend_streams() {
  if (conn_ && !done_) ngtcp2_conn_extend_max_streams_bidi(conn_, 1);
}

void H3Connection::submit_head(H3Stream& s, HeaderBlock& head, bool has_body) {
  if (s.closed || !h3_) return;
  s.responded = true;
  boost::container::small_vector<nghttp3_nv, 16> nva;  // a usual head: no allocation
  head.pairs_into<nghttp3_nv>(nva, NGHTTP3_NV_FLAG_NONE);
  nghttp3_data_reader reader{&H3Callbacks::read_body};
  nghttp3_conn_submit_response(h3_, s.id, nva.data(), nva.size(), has_body ? &reader : nullptr);
  kick();
}

void H3Connection::submit_reply(H3Stream& s, Reply reply) {
  reply.request_id = s.x.request_id;
  if (s.closed) return;
  s.x.status = reply.status;
  count_own_status(w_.gate, &s.x, reply.status);
  // The request's body, if any, is not needed: it is consumed as it comes, and the client is
  // asked to stop sending it (RFC 9114 4.1: a response may come before the request ends).
  s.discard_body = true;
  consumed(s, s.body.size());
  s.body.clear();
  if (!s.body_done && conn_) ngtcp2_conn_shutdown_stream_read(conn_, 0, s.id, NGHTTP3_H3_NO_ERROR);
  auto add = [](HeaderBlock& head) {
    return [&head](std::string_view n, std::string_view v) { head.add(n, v); };
  };
  if (is_grpc(s.head.fields)) {
    HeaderBlock head(200);  // trailers-only (grpc.hpp)
    head.add("content-type", "application/grpc");
    grpc_reply_fields(reply, add(head));
    submit_head(s, head, false);
    return;
  }
  HeaderBlock head(reply.status);
  reply_headers(reply, add(head));
  std::string storage;
  const auto body = reply_body(reply, storage);
  head.add("server", "floodgate");
  head.add("content-type", reply_content_type(reply));
  head.add("content-length", std::uint64_t{body.size()});
  if (!body.empty()) {
    s.out.emplace_back(body);
    s.out_bytes += body.size();
  }
  s.out_done = true;
  submit_head(s, head, true);
}

void H3Connection::resume(H3Stream& s) {
  if (s.closed || !h3_) return;
  if (std::exchange(s.out_blocked, false)) nghttp3_conn_resume_stream(h3_, s.id);
  kick();
}

void H3Connection::consumed(H3Stream& s, std::size_t n) {
  if (n == 0 || !conn_ || done_) return;
  ngtcp2_conn_extend_max_stream_offset(conn_, s.id, n);
  ngtcp2_conn_extend_max_offset(conn_, n);
  kick();
}

void H3Connection::reset(H3Stream& s, std::uint64_t code) {
  if (s.closed || s.reset_submitted || !conn_) return;
  s.reset_submitted = true;
  ngtcp2_conn_shutdown_stream(conn_, 0, s.id, code);
  kick();
}

void H3Connection::charge_reset() {
  if (done_ || close_pending_ || resets_.take(std::chrono::steady_clock::now())) return;
  // From inside ngtcp2's or nghttp3's callbacks: the close is written once they return.
  w_.metrics.http3_flood_closes.fetch_add(1, std::memory_order_relaxed);
  ngtcp2_ccerr_set_application_error(&last_error_, NGHTTP3_H3_EXCESSIVE_LOAD, nullptr, 0);
  close_pending_ = true;
  kick();
}

void H3Connection::stalled(H3Stream& s) {
  if (s.closed || s.reset_submitted) return;
  w_.metrics.http3_stalled_streams.fetch_add(1, std::memory_order_relaxed);
  reset(s, NGHTTP3_H3_REQUEST_CANCELLED);
}

}  // namespace floodgate::http
