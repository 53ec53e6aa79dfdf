#include "h2_connection.hpp"

#include <nghttp2/nghttp2.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/error.hpp>

#include <charconv>
#include <cstring>
#include <vector>

#include "exchange/grpc.hpp"
#include "exchange/pipeline.hpp"
#include "h2_callbacks.hpp"
#include "net/coro_names.hpp"
#include "nghttp2_util.hpp"

namespace floodgate::http {

namespace {

// CONTINUATION frames one header block may take (CVE-2024-27316): the header list size bounds
// the bytes, this the frames.
constexpr std::size_t kMaxContinuations = 8;

}  // namespace

H2Connection::H2Connection(Services& w, Transport& client, Watchdog& watch,
                           std::string_view peer_ip, const config::IpAddress& peer,
                           SessionRegistry::Entry& entry, StreamService* service,
                           std::string_view alt_svc)
    : w_(w),
      service_(service),
      client_(client),
      watch_(watch),
      write_watch_(client.get_executor()),
      max_header_bytes_(w.snapshot()->server.max_header_bytes),
      peer_ip_(peer_ip),
      peer_(peer),
      alt_svc_(alt_svc),
      entry_(entry),
      write_wake_(client.get_executor()),
      tasks_done_(client.get_executor()),
      resets_(w.snapshot()->server.http2.max_resets_per_second),
      max_tasks_(static_cast<int>(w.snapshot()->server.http2.max_concurrent_streams)) {
  nghttp2_session_callbacks* cb = nullptr;
  nghttp2_session_callbacks_new(&cb);
  nghttp2_session_callbacks_set_on_begin_headers_callback(cb, &H2Callbacks::on_begin_headers);
  nghttp2_session_callbacks_set_on_header_callback(cb, &H2Callbacks::on_header);
  nghttp2_session_callbacks_set_on_frame_recv_callback(cb, &H2Callbacks::on_frame_recv);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, &H2Callbacks::on_data_chunk);
  nghttp2_session_callbacks_set_on_stream_close_callback(cb, &H2Callbacks::on_stream_close);
  nghttp2_session_callbacks_set_on_frame_send_callback(cb, &H2Callbacks::on_frame_send);
  const auto config = w_.snapshot();
  const auto& h2 = config->server.http2;
  nghttp2_option* opt = nullptr;
  nghttp2_option_new(&opt);
  // The body's window reopens only as the body is forwarded (consumed()).
  nghttp2_option_set_no_auto_window_update(opt, 1);
  // Rapid reset (CVE-2023-44487) is counted in resets_ (charge_reset()), with the resets the
  // client makes us send. nghttp2's own count of RST_STREAM frames stays as a backstop (frames
  // for streams already closed never reach on_stream_close), at twice the budget so that ours,
  // which says ENHANCE_YOUR_CALM and sends nothing after its GOAWAY, is the one that acts.
  nghttp2_option_set_stream_reset_rate_limit(opt, 2ull * h2.max_resets_per_second,
                                             2ull * h2.max_resets_per_second);
  nghttp2_option_set_max_continuations(opt, kMaxContinuations);
  nghttp2_option_set_max_settings(opt, 32);        // entries per SETTINGS frame
  nghttp2_option_set_max_outbound_ack(opt, 1000);  // PING / SETTINGS floods
  nghttp2_option_set_max_deflate_dynamic_table_size(opt, 4096);
  nghttp2_session_server_new2(&session_, cb, this, opt);
  nghttp2_option_del(opt);
  nghttp2_session_callbacks_del(cb);
  nghttp2_settings_entry settings[] = {
      {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, h2.max_concurrent_streams},
      {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE,
       static_cast<std::uint32_t>(config->server.max_header_bytes)},
      {NGHTTP2_SETTINGS_ENABLE_PUSH, 0}};
  nghttp2_submit_settings(session_, NGHTTP2_FLAG_NONE, settings, std::size(settings));
}

H2Connection::~H2Connection() {
  nghttp2_session_del(session_);
}

asio::awaitable<void> H2Connection::run(boost::beast::flat_buffer& already) {
  using namespace asio::experimental::awaitable_operators;
  co_await (read_loop(already) && write_loop());
  // Every stream coroutine uses this object: wait for the last one.
  abort_streams();
  while (tasks_ > 0) {
    tasks_done_.expires_at(asio::steady_timer::time_point::max());
    co_await tasks_done_.async_wait(as_tuple(use_awaitable));
  }
}

void H2Connection::abort_streams() {
  std::vector<std::shared_ptr<H2Stream>> open;
  for (auto& [id, s] : streams_) open.push_back(s);
  for (auto& s : open) {
    s->closed = true;
    s->notify();
    if (s->upstream) {
      boost::system::error_code ignored;
      s->upstream->stream.socket().close(ignored);
    }
  }
  streams_.clear();
}

bool H2Connection::heads_pending() const {
  for (const auto& [id, s] : streams_)
    if (!s->head_done) return true;
  return false;
}

void H2Connection::update_state() {
  entry_.state = streams_.empty() && tasks_ == 0 ? SessionRegistry::Entry::State::idle
                                                 : SessionRegistry::Entry::State::busy;
}

asio::awaitable<void> H2Connection::read_loop(boost::beast::flat_buffer& already) {
  auto config = w_.snapshot();
  if (already.size() > 0) {
    auto data = already.data();
    auto rv = nghttp2_session_mem_recv(session_, static_cast<const std::uint8_t*>(data.data()),
                                       data.size());
    already.consume(already.size());
    if (rv < 0) closing_ = true;
    kick();
  }
  std::vector<std::uint8_t> buf(kReadChunk);
  bool first = true;
  while (!closing_) {
    if (w_.draining && !goaway_sent_) {
      // Open streams finish; new ones are refused (GOAWAY names the last one taken).
      nghttp2_submit_goaway(session_, NGHTTP2_FLAG_NONE,
                            nghttp2_session_get_last_proc_stream_id(session_), NGHTTP2_NO_ERROR,
                            nullptr, 0);
      goaway_sent_ = true;
      kick();
    }
    if (goaway_sent_ && streams_.empty() && tasks_ == 0) break;
    if (!nghttp2_session_want_read(session_)) break;
    update_state();
    // A header block must be finished within header_read, as an HTTP/1.1 head (a HEADERS
    // frame without END_HEADERS, then silence, would otherwise hold the connection); a
    // connection with nothing open may stay silent for the idle timeout (before its first
    // request, header_read); one serving streams waits for them, each bounded by its own.
    if (first || heads_pending())
      watch_.guard(client_.socket(), config->server.timeouts.header_read);
    else if (streams_.empty() && tasks_ == 0)
      watch_.guard(client_.socket(), config->server.timeouts.idle);
    else
      watch_.relax();
    auto [ec, n] = co_await client_.async_read_some(asio::buffer(buf.data(), buf.size()),
                                                    as_tuple(use_awaitable));
    entry_.state = SessionRegistry::Entry::State::busy;
    if (ec) {
      // A drain cancels the wait of a connection with nothing open: say GOAWAY first.
      if (ec == asio::error::operation_aborted && w_.draining && client_.socket().is_open() &&
          watch_.translate(ec) != boost::beast::error::timeout)
        continue;
      break;
    }
    first = false;
    auto rv = nghttp2_session_mem_recv(session_, buf.data(), n);
    kick();
    if (rv < 0) {
      // A connection error. nghttp2 has queued a terminating GOAWAY for most (this call then
      // adds nothing); for some (too many CONTINUATION frames) it queues none, and other
      // frames waiting to be sent do not say why the connection ends: the client gets one.
      nghttp2_session_terminate_session(session_, NGHTTP2_PROTOCOL_ERROR);
      kick();
      break;
    }
  }
  watch_.relax();
  closing_ = true;
  kick();
}

asio::awaitable<void> H2Connection::write_loop() {
  const auto timeout = w_.snapshot()->server.timeouts.idle;
  for (;;) {
    outbuf_.clear();
    take_output(session_, outbuf_, kWriteBatch);
    if (!outbuf_.empty()) {
      write_watch_.guard(client_.socket(), timeout);
      auto [ec, n] =
          co_await asio::async_write(client_, asio::buffer(outbuf_), as_tuple(use_awaitable));
      write_watch_.relax();
      if (ec) {
        closing_ = true;
        boost::system::error_code ignored;
        client_.socket().cancel(ignored);  // the reader stops too
        co_return;
      }
      continue;
    }
    if (closing_ || (!nghttp2_session_want_read(session_) && !nghttp2_session_want_write(session_)))
      co_return;
    write_wake_.expires_at(asio::steady_timer::time_point::max());
    co_await write_wake_.async_wait(as_tuple(use_awaitable));
  }
}

void H2Connection::kick() {
  write_wake_.cancel();
}

void H2Connection::start_stream(std::shared_ptr<H2Stream> s) {
  ++tasks_;
  asio::co_spawn(client_.get_executor(), serve(std::move(s)), [this](std::exception_ptr e) {
    if (e) {
      w_.metrics.unexpected_exceptions.fetch_add(1, std::memory_order_relaxed);
      try {
        std::rethrow_exception(e);
      } catch (const std::exception& ex) {
        w_.log.error("h2 stream: unexpected exception: {}", ex.what());
      } catch (...) {
      }
    }
    --tasks_;
    tasks_done_.cancel();
    // The reader waits without a deadline while streams are open: let it look again (a drain
    // may be waiting for this one, or the idle clock starts now).
    if (tasks_ == 0) {
      boost::system::error_code ignored;
      if (w_.draining) client_.socket().cancel(ignored);
    }
    kick();
  });
}

void H2Connection::submit_head(H2Stream& s, H2HeaderBlock& head, bool has_body) {
  if (s.closed || s.responded) return;
  s.responded = true;
  nghttp2_data_provider provider{};
  provider.source.ptr = &s;
  provider.read_callback = &H2Callbacks::read_body;
  const auto nva = head.pairs();
  nghttp2_submit_response(session_, s.id, nva.data(), nva.size(), has_body ? &provider : nullptr);
  kick();
}

void H2Connection::submit_reply(H2Stream& s, Reply reply) {
  reply.request_id = s.x.request_id;
  reply.alt_svc = s.x.alt_svc;
  // A reset stream gets nothing: no status to log, count or charge a counting limit for.
  if (s.closed) return;
  s.x.status = reply.status;
  count_own_status(w_.gate, &s.x, reply.status);
  // The request's body, if any, is not needed: its DATA is consumed as it comes.
  s.discard_body = true;
  consumed(s, s.body.size());
  s.body.clear();
  auto add = [](H2HeaderBlock& head) {
    return [&head](std::string_view n, std::string_view v) { head.add(n, v); };
  };
  if (is_grpc(s.head.fields)) {
    // A gRPC call is answered trailers-only (grpc.hpp): :status 200, no body.
    H2HeaderBlock head(200);
    head.add("content-type", "application/grpc");
    grpc_reply_fields(reply, add(head));
    submit_head(s, head, false);
    return;
  }
  H2HeaderBlock head(reply.status);
  reply_headers(reply, add(head));
  std::string storage;
  s.out = std::string(reply_body(reply, storage));
  s.out_sent = 0;
  s.out_done = true;
  head.add("server", "floodgate");
  head.add("content-type", reply_content_type(reply));
  head.add("content-length", std::uint64_t{s.out.size()});
  submit_head(s, head, true);
}

void H2Connection::resume(H2Stream& s) {
  if (s.closed) return;
  nghttp2_session_resume_data(session_, s.id);
  kick();
}

void H2Connection::consumed(H2Stream& s, std::size_t n) {
  if (n == 0) return;
  nghttp2_session_consume(session_, s.id, n);
  kick();
}

void H2Connection::reset(H2Stream& s, std::uint32_t code, ResetCause cause) {
  if (s.closed || s.reset_submitted) return;
  s.reset_submitted = true;
  s.reset_uncharged = cause != ResetCause::client_frames;
  nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, s.id, code);
  kick();
}

void H2Connection::stalled(H2Stream& s) {
  if (s.closed || s.reset_submitted) return;
  w_.metrics.http2_stalled_streams.fetch_add(1, std::memory_order_relaxed);
  reset(s, NGHTTP2_CANCEL, ResetCause::stall);
}

void H2Connection::charge_reset() {
  if (flooded_ || resets_.take(std::chrono::steady_clock::now())) return;
  // No new stream is taken, and nothing is sent for the ones in the rest of the input (a frame
  // after this GOAWAY would tell the client nothing); nghttp2 stops reading once it is sent.
  flooded_ = true;
  goaway_sent_ = true;
  nghttp2_session_terminate_session(session_, NGHTTP2_ENHANCE_YOUR_CALM);
  kick();
}

}  // namespace floodgate::http
