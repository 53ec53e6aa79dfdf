#pragma once
// HTTP/2 connections to an origin (`upstreams.NAME.protocol: h2`), owned by one worker (no
// locks): each carries many exchanges at once as streams, up to the origin's
// SETTINGS_MAX_CONCURRENT_STREAMS. Framing and HPACK are libnghttp2's: a client session
// driven with mem_recv/mem_send over the connection's Transport, as on the client side
// (h2_connection.hpp). No exception crosses nghttp2's callbacks.
//
// A stream is an H2Call. Its user puts the request's body (and trailers) in and takes the
// response's head, body and trailers out; `wake` is cancelled whenever the call changes.
// Flow control holds end to end: the origin's window reopens only as the user takes body
// bytes (take()), and the user feeds the request's body only as nghttp2 sends it.
//
// GOAWAY: the streams above its last-stream-id were never processed by the origin; they end
// `refused`, and their user may send them again on another connection (the pool opens one).
// A stream the origin may have seen is never sent twice.

#include <nghttp2/nghttp2.h>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "floodgate/config/config.hpp"
#include "h2_header_block.hpp"
#include "net/changed_on.hpp"
#include "net/upstream_pool.hpp"
#include "net/watchdog.hpp"

namespace floodgate::http {

// Fields received or to send (a response's head, trailers): names lower-case.
using H2Fields = Fields;

// Queues `fields` as stream id's trailers (a HEADERS frame with END_STREAM); nghttp2 copies
// them. From a data provider's callback, with NGHTTP2_DATA_FLAG_NO_END_STREAM on the last DATA.
int submit_trailers(nghttp2_session* session, std::int32_t id, H2Fields& fields);

struct H2Call {
  // The request's body not yet handed to nghttp2, whether it ends after it, and the
  // trailers that follow it (none: END_STREAM goes on the last DATA).
  std::string out;
  bool out_done = false;
  H2Fields out_trailers;
  // What nghttp2 has taken of the body, kept for a retry while it is small (kRetainedBody).
  std::string sent;
  bool replayable = true;  // every byte sent so far is in `sent`
  // The response: the final head (1xx skipped), body bytes received and not yet taken, the
  // trailers.
  int status = 0;
  H2Fields head;
  bool head_done = false;
  std::string in;
  H2Fields trailers;
  bool in_done = false;     // the origin ended its side (END_STREAM)
  bool closed = false;      // the stream is over: ended, reset, or its connection is gone
  std::uint32_t error = 0;  // not NO_ERROR: the stream failed (RST_STREAM code or the connection's)
  bool refused = false;     // failed before the origin processed it: may be sent again
  // Cancelled whenever the call changes: the user's own timer (an HTTP/2 stream's wake), so
  // that one wait covers both of its sides.
  boost::asio::steady_timer* waker = nullptr;
  // A second one, for a user feeding the request beside the one reading the response (a
  // full-duplex exchange), so that neither wait cancels the other.
  boost::asio::steady_timer* waker_out = nullptr;
  void notify() {
    if (waker) waker->cancel();
    if (waker_out) waker_out->cancel();
  }
  // The connection's own.
  std::int32_t id = -1;
  bool head_sent = false;       // HEADERS left for the origin: it may have processed the request
  int pending_status = 0;       // the :status of the header block being received
  std::size_t block_bytes = 0;  // of the header block being received, as HPACK counts them
};
using H2CallPtr = std::shared_ptr<H2Call>;

class H2UpstreamPool;

class H2UpstreamConnection : public std::enable_shared_from_this<H2UpstreamConnection> {
 public:
  // The response head (or trailers) an origin may send (SETTINGS_MAX_HEADER_LIST_SIZE), as on
  // an HTTP/1.1 upstream; past it the stream is reset.
  static constexpr std::uint32_t kMaxHeaderList = 64 * 1024;
  // A request body is kept for a retry after GOAWAY or REFUSED_STREAM up to this size (a
  // gRPC unary call fits many times over); a longer one that is refused fails instead.
  static constexpr std::size_t kRetainedBody = 64 * 1024;

  H2UpstreamConnection(H2UpstreamPool& pool, const config::UpstreamServer& u);
  ~H2UpstreamConnection();
  H2UpstreamConnection(const H2UpstreamConnection&) = delete;
  H2UpstreamConnection& operator=(const H2UpstreamConnection&) = delete;

  // Connects (TCP, TLS with ALPN h2 for https), then serves the connection until it ends.
  boost::asio::awaitable<void> run(UpstreamPool& connector, config::UpstreamServer u);

  // connecting: TCP (and TLS) under way, or waiting for the origin's SETTINGS.
  enum class State { connecting, open, closed };
  State state() const { return state_; }
  // A new stream may start here now (open, no GOAWAY, below the origin's stream limit).
  bool has_room() const;
  // Waits for the connection to finish connecting.
  boost::asio::awaitable<void> ready();
  const std::string& why() const { return why_; }  // why connecting failed
  bool timed_out() const { return timed_out_; }

  // Opens a stream for `call` with the request head `nva` (pseudo-headers first); false if
  // this connection cannot take it any more.
  bool submit(const H2CallPtr& call, std::span<const nghttp2_nv> nva, bool has_body);
  void resume(H2Call& c);               // more of c.out, or its end, is there
  void take(H2Call& c, std::size_t n);  // n response body bytes taken: the window reopens
  void cancel(H2Call& c);               // the client went away: RST_STREAM CANCEL
  void close();                         // ends the connection (a drain, a shutdown)
  std::size_t streams() const { return calls_.size(); }

 private:
  friend struct H2UpstreamCallbacks;
  friend class H2UpstreamPool;
  boost::asio::awaitable<void> read_loop();
  boost::asio::awaitable<void> write_loop(std::chrono::milliseconds timeout);
  void finish(std::uint32_t code);  // every open call fails with code (refused if unsent)
  // A connection with no stream open is closed after a while; one with streams has no
  // deadline of its own (each user times its own waits).
  void idle_watch();
  void settings_received();  // the origin's SETTINGS: open now, its stream limit known
  void kick() { write_wake_.cancel(); }

  H2UpstreamPool& pool_;
  boost::asio::any_io_executor ex_;
  std::string key_;                            // the upstream's pool_key
  std::chrono::milliseconds connect_timeout_;  // also for the origin's first SETTINGS
  UpstreamConnectionPtr conn_;
  nghttp2_session* session_ = nullptr;
  State state_ = State::connecting;
  std::string why_;  // why connecting failed
  bool timed_out_ = false;
  std::size_t waiting_ =
      0;  // callers waiting for this connection to be ready (H2UpstreamPool::get)
  bool goaway_ = false;
  bool closing_ = false;  // close() was called: a connection still connecting stops there
  std::map<std::int32_t, H2CallPtr> calls_;
  boost::asio::steady_timer ready_;
  boost::asio::steady_timer write_wake_;
  std::unique_ptr<Watchdog> write_watch_;
  std::string outbuf_;
};

// Kept by a call's user for as long as it serves the call: when the user is done, however
// that happened, the call no longer wakes it (its timer may be gone), and its stream, if
// still open (the client went away, or the response ended before the request), is reset.
struct H2CallGuard {
  H2CallPtr& call;
  std::shared_ptr<H2UpstreamConnection>& conn;
  ~H2CallGuard() {
    if (!call) return;
    call->waker = nullptr;
    call->waker_out = nullptr;
    if (conn) conn->cancel(*call);
  }
};

// The worker's HTTP/2 upstream connections, by Upstream::pool_key.
class H2UpstreamPool {
 public:
  explicit H2UpstreamPool(UpstreamPool& connector) : connector_(connector) {}
  boost::asio::any_io_executor executor() const { return connector_.executor(); }

  // Attempts a stream gets in all when the origin refuses it unprocessed (GOAWAY,
  // REFUSED_STREAM) or a connection cannot take it: each on another connection.
  static constexpr int kAttempts = 3;

  struct Got {
    std::shared_ptr<H2UpstreamConnection> conn;  // null on failure
    std::string why;                             // the failure in words
    bool timeout = false;
  };
  // An open connection to `u` with room for one more stream, if there is one (no wait).
  std::shared_ptr<H2UpstreamConnection> ready(const config::UpstreamServer& u);
  // A connection to `u` with room for one more stream: an open one, one being connected, or
  // a new one.
  boost::asio::awaitable<Got> get(const config::UpstreamServer& u);
  // Ends every connection; running() tells when their coroutines have all finished.
  void close_all();
  int running() const { return running_; }

 private:
  friend class H2UpstreamConnection;
  // Streams a connection still connecting is taken to have room for: what the last
  // connection to the same origin was allowed, or 100 before any.
  std::size_t assumed_streams(const std::string& key) const;
  std::unordered_map<std::string, std::uint32_t> learned_;
  UpstreamPool& connector_;
  std::unordered_map<std::string, std::vector<std::shared_ptr<H2UpstreamConnection>>> conns_;
  int running_ = 0;
};

}  // namespace floodgate::http
