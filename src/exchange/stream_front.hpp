#pragma once
// The client side of one stream of a multiplexed connection (an HTTP/2 stream, an HTTP/3
// stream) for the proxy driver (proxy.hpp), written once for both: the request's body taken
// from the stream's DATA as it arrives (the client's flow-control window reopened only as each
// piece has been forwarded), the response's HEADERS submitted with the body's first piece, its
// DATA queued for the connection's writer (at most Stream::kMaxOut waiting), trailers after. A
// client that takes none of it, or sends none of its body, for the idle timeout has the stream
// reset.
//
// What differs between the protocols is the connection's and the stream's, by the same names:
// Conn::consumed, stalled, reset_malformed, reset_aborted, submit_head, resume, take_scratch,
// give_back; Stream's fields (head, method, path, authority, body, body_done, trailers,
// out_trailers, out_done, responded, closed, wake, wake_out, upstream, x), out_waiting() and
// queue_out(). Included only by the protocols' stream files (h2_stream.cpp, h3_stream.cpp),
// where the coroutines are instantiated.

#include <boost/asio/awaitable.hpp>

#include <algorithm>
#include <memory>
#include <span>
#include <string>
#include <utility>

#include "forwarding.hpp"
#include "net/changed_on.hpp"
#include "net/scratch_pool.hpp"
#include "pipeline.hpp"
#include "proxy.hpp"
#include "services.hpp"
#include "stream_service.hpp"

namespace floodgate::http {

template <class Conn, class Stream, class Block>
class StreamFront final : public Front {
 public:
  // Makes the stream's fields the upstream's request head (method, target, :authority as
  // Host), as an HTTP/1.1 request's head is, once what the client asked of trailers is read.
  StreamFront(Conn& conn, Stream& s) : conn_(conn), s_(s) {
    te_trailers_ = asks_for_trailers(s.head.fields);
    auto& req = s.head;
    req.method = s.method;  // the stream's, which outlives the exchange
    req.target = s.path;
    if (!s.authority.empty()) req.fields.set("Host", s.authority);
    // The protocol library has checked that DATA matches a content-length.
    framing_.content_length = content_length_of(req.fields);
    framing_.chunked = !framing_.content_length && !body_done();
  }
  ~StreamFront() override {
    conn_.consumed(s_, unconsumed_);  // a piece read when the exchange ended otherwise
    if (scratch_) conn_.give_back(std::move(scratch_));
  }
  StreamFront(const StreamFront&) = delete;
  StreamFront& operator=(const StreamFront&) = delete;

  RequestHead& request() override { return s_.head; }
  UpstreamFraming framing() const override { return framing_; }
  bool body_done() const override { return s_.body_done && s_.body.empty() && s_.trailers.empty(); }
  bool takes_trailers() const override { return te_trailers_; }
  boost::asio::awaitable<bool> send_continue() override { co_return true; }
  const Trailers* request_trailers() const override {
    return s_.trailers.empty() ? nullptr : &s_.trailers;
  }
  bool duplex() const override { return true; }
  void watch(const Abandon& abandon) override { abandon_ = &abandon; }
  Wakers wakers() override { return {&s_.wake, &s_.wake_out}; }
  const bool* gone_flag() const override { return &s_.closed; }
  bool responded() const override { return s_.responded; }
  bool eager_head() const override { return true; }
  void using_upstream(UpstreamConnection* c) override { s_.upstream = c; }
  bool keeps_alive() const override { return true; }
  std::span<char> scratch() override {
    if (!scratch_) scratch_ = conn_.take_scratch();
    return *scratch_;
  }
  std::string& head_buffer() override { return head_; }
  ResponseHead& response_head() override { return response_; }
  Watchdog* watchdog() override { return nullptr; }
  boost::asio::awaitable<void> tunnel(ResponseHead&, UpstreamConnection&) override {
    co_return;  // a stream never asks for an upgrade (CONNECT is refused)
  }
  void abort() override {
    if (!s_.closed) conn_.reset_aborted(s_);
  }

  boost::asio::awaitable<BodyRead> read_body(std::span<char> into) override {
    // The piece before has been handed on: the client's window reopens by it.
    conn_.consumed(s_, std::exchange(unconsumed_, 0));
    const auto idle = s_.x.config->server.timeouts.idle;
    BodyRead gone;
    gone.failure = BodyRead::Failure::gone;
    for (;;) {
      if (abandoned()) co_return gone;  // reset by the client: the partial request is dropped
      if (!s_.body.empty()) {
        const auto n = std::min(into.size(), s_.body.size());
        std::copy_n(s_.body.data(), n, into.data());
        s_.body.erase(0, n);
        unconsumed_ = n;
        forwarded_ += n;
        if (forwarded_ > s_.x.config->server.max_body_bytes) {
          BodyRead too_large;
          too_large.failure = BodyRead::Failure::too_large;
          co_return too_large;
        }
        // The library resets a stream whose DATA overruns its content-length; should a byte
        // past it ever get here, it would be the start of a second request upstream: never
        // written.
        if (framing_.content_length && forwarded_ > *framing_.content_length) {
          conn_.reset_malformed(s_);
          co_return gone;
        }
        const bool last = s_.body_done && s_.body.empty();
        // The last piece has nothing after it to wait for: its window reopens now (an
        // unconsumed byte would be lost to the connection's window for good).
        if (last) conn_.consumed(s_, std::exchange(unconsumed_, 0));
        co_return BodyRead{n, last};
      }
      if (s_.body_done) co_return BodyRead{0, true};
      if (!co_await changed_on(s_.wake_out, idle)) {  // the client stalled mid-body
        conn_.stalled(s_);
        co_return gone;
      }
    }
  }

  void set_head(ResponseHead& res, const ResponseBody& body) override {
    head_block_ = Block(res.status);
    for (const auto& f : res.fields) head_block_.add(f.name, f.value);
    if (body.length) head_block_.add("content-length", *body.length);
    has_body_ = body.has_body;
  }

  boost::asio::awaitable<bool> write_body(std::span<const char> piece, bool last,
                                          const Trailers* trailers) override {
    if (abandoned()) co_return false;
    // The HEADERS leave with the body's first piece (a small response: one write).
    if (!s_.responded) conn_.submit_head(s_, head_block_, has_body_);
    if (!has_body_) co_return true;
    if (!piece.empty()) {
      // A client that takes none of it for the idle timeout holds the stream, its buffer and
      // an upstream no longer: the stream is reset.
      const auto idle = s_.x.config->server.timeouts.idle;
      while (s_.out_waiting() >= Stream::kMaxOut && !abandoned())
        if (!co_await changed_on(s_.wake, idle)) conn_.stalled(s_);
      if (abandoned()) co_return false;
      s_.queue_out(piece);
    }
    if (last) {
      if (trailers)
        for (std::size_t i = 0; i < trailers->size(); ++i)
          s_.out_trailers.add(trailers->name(i), trailers->value(i));
      s_.out_done = true;
    }
    conn_.resume(s_);
    co_return true;
  }

 private:
  bool abandoned() const { return s_.closed || (abandon_ && (*abandon_)()); }

  Conn& conn_;
  Stream& s_;
  const Abandon* abandon_ = nullptr;
  UpstreamFraming framing_;
  bool te_trailers_ = false;
  std::uint64_t forwarded_ = 0;  // of the request's body
  std::size_t unconsumed_ = 0;   // bytes handed on whose window has not reopened yet
  Block head_block_;             // the response's, submitted with its body's first piece
  bool has_body_ = false;
  std::string head_;
  ResponseHead response_;
  std::unique_ptr<ScratchPool::Scratch> scratch_;  // the connection's, taken when first used
};

// One stream through the pipeline, written once for both protocols: its head checked
// (refused_stream_head), routed and decided, then a reply of ours or the request taken to its
// upstream by the driver through the stream's Front_; with a `service` (rls.listen), every
// stream is the service's instead. The exchange is logged once the stream has closed; a
// client that takes none of the response for the idle timeout gets the stream reset. The
// connection has filled the exchange from the head already (its take_head).
template <class Front_, class Conn, class Stream>
boost::asio::awaitable<void> serve_stream(Conn& conn, Services& w, Stream& s,
                                          std::size_t max_header_bytes,
                                          StreamService* service = nullptr) {
  auto& x = s.x;
  ++w.in_flight;
  struct InFlight {
    std::uint64_t& n;
    ~InFlight() { --n; }
  } in_flight{w.in_flight};
  const auto& config = *x.config;
  std::optional<Reply> reply;
  if (int status = refused_stream_head(s.method, s.extended_connect, s.authority, s.head.fields,
                                       s.header_bytes, max_header_bytes))
    reply = Reply{status};
  if (service && !reply) {
    Front_ front(conn, s);
    co_await service->serve(front, x);
  } else if (!reply) {
    if (auto unrouted = route_exchange(x))
      reply = Reply{unrouted->status};
    else if (s.closed)
      co_return;  // reset before anything was decided: nothing is charged
    else if (gated(x))
      reply = co_await decide_exchange(w.gate, x, w.log);
    else
      count_ungated(w.gate, x);
  }
  if (reply) {
    conn.submit_reply(s, *reply);
  } else if (!service) {
    // Held until the response ends: an open stream counts against a concurrency limit, and a
    // counting limit charges by the status it ends with.
    FinishGuard finish(w.gate, x);
    Front_ front(conn, s);
    const auto done = co_await w.proxy.forward(front, x, config.upstream_of(*x.route));
    if (done.answer != 0 && !s.closed) {
      if (s.responded)
        conn.reset_aborted(s);
      else
        conn.submit_reply(s, Reply{done.answer});
    }
  }
  // The library reads the rest of the body and sends the response until the stream closes; a
  // client that takes none of it for the idle timeout gets the stream reset.
  while (!s.closed)
    if (!co_await changed_on(s.wake, config.server.timeouts.idle)) conn.stalled(s);
  w.close(x);
}

}  // namespace floodgate::http
