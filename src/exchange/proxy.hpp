#pragma once
// THE proxy driver: an admitted exchange taken to a server of its route's upstream and back,
// written once against two interfaces, the client side (Front) and the upstream side
// (UpstreamCall: HTTP/1.1 or h2). Choosing the server and another one when no connection can
// be made, sending the request again when the call says it safely may (a reused keep-alive
// connection found closed, a stream the origin refused unprocessed), 1xx responses, the
// upstream's metrics and ejection, settlement, the rate-limit headers, the status a counting
// limit charges by, and what the client is told when the upstream fails: all here, for every
// pair of protocols. A front frames; a call speaks to the origin; neither decides.

#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "exchange.hpp"
#include "net/upstream_health.hpp"
#include "net/upstream_pool.hpp"
#include "net/watchdog.hpp"
#include "pipeline.hpp"

namespace floodgate::http {

// A piece of a message body read: `n` bytes (into the caller's buffer), `last` when the
// message ended with it; or why it could not be read.
struct BodyRead {
  enum class Failure {
    none,
    gone,       // the sender went away or stalled past its timeout (nothing to answer)
    too_large,  // past server.max_body_bytes: 413
    malformed,  // its framing broke: 400 from a client, 502 from an upstream
    timeout,    // an upstream that stopped sending: 504 when nothing reached the client yet
  };
  std::size_t n = 0;
  bool last = false;
  Failure failure = Failure::none;
  boost::system::error_code error;  // what failed, for the log
  explicit operator bool() const { return failure == Failure::none; }
};

// The response's body as the upstream frames it: its length when one was given (0 for a
// response that ended with its head), and whether any body follows the head at all.
struct ResponseBody {
  std::optional<std::uint64_t> length;
  bool has_body = false;
};

// A message's trailer fields: settled by the driver, then written on by the front that
// takes them.
using Trailers = Fields;

// Set when an exchange is over on one side, so that the other stops waiting: the client
// went away (a stream reset), or the driver stopped one direction of a full-duplex exchange.
struct Abandon {
  const bool* client_gone = nullptr;  // the front's own flag (null: it has none)
  bool stopped = false;               // set by the driver
  bool operator()() const { return stopped || (client_gone && *client_gone); }
};

// The timers a stream's waits run on (a front with streams: its own, which the upstream call
// shares, so that a change on either side wakes the one coroutine waiting): `in` for the
// coroutine relaying the response, `out` for the one feeding the request beside it.
struct Wakers {
  boost::asio::steady_timer* in = nullptr;
  boost::asio::steady_timer* out = nullptr;
};

// The client side of one exchange. It counts the body bytes it reads and writes (the
// exchange's bytes_in and bytes_out).
class Front {
 public:
  virtual ~Front() = default;
  // The request's head as received; the driver rewrites it for the upstream.
  virtual RequestHead& request() = 0;
  // How its body is framed (UpstreamFraming::upgrade: an admitted WebSocket upgrade).
  virtual UpstreamFraming framing() const = 0;
  // Nothing (more) of the request's body is to be read.
  virtual bool body_done() const = 0;
  // The client takes trailers (TE: trailers).
  virtual bool takes_trailers() const = 0;
  // The body is about to be read: 100 Continue when the client asked for it. False when the
  // client is gone.
  virtual boost::asio::awaitable<bool> send_continue() = 0;
  // The next piece of the request's body into `into`.
  virtual boost::asio::awaitable<BodyRead> read_body(std::span<char> into) = 0;
  // The request's trailers, once its body has ended (null: none).
  virtual const Trailers* request_trailers() const = 0;
  // Both directions at once (an HTTP/2 stream to an h2 upstream: gRPC's streaming calls);
  // else the request's body is sent whole before the response is read.
  virtual bool duplex() const = 0;
  // What the exchange's waits watch to stop (the driver's), and the timers they run on.
  virtual void watch(const Abandon& abandon) = 0;
  virtual Wakers wakers() = 0;
  virtual const bool* gone_flag() const = 0;  // set when the client went away (null: none)

  // The response: its head (rewritten by the driver: hop-by-hop out, rate headers in), kept
  // until the first piece of its body (or its end) goes with it.
  virtual void set_head(ResponseHead& head, const ResponseBody& body) = 0;
  // A piece of the response's body; `last` ends it, with `trailers` (may be null). False when
  // the client is gone (the response is then cut short).
  virtual boost::asio::awaitable<bool> write_body(std::span<const char> piece, bool last,
                                                  const Trailers* trailers) = 0;
  // Whether anything of the response has reached the client (then no status of ours can).
  virtual bool responded() const = 0;
  // A head sent alone costs nothing more (HTTP/2: HEADERS are batched with what follows if
  // it comes soon): sent at once when none of the body is here yet.
  virtual bool eager_head() const = 0;
  // The response was cut short after it began: the client must learn it is incomplete.
  virtual void abort() = 0;
  // The upstream connection in use, for a front that must close it when the client goes.
  virtual void using_upstream(UpstreamConnection* c) = 0;
  // The client connection may carry another request once this response has ended.
  virtual bool keeps_alive() const = 0;
  // The buffer bodies are relayed through (the connection's one).
  virtual std::span<char> scratch() = 0;
  // Where a head is serialized (the connection's, reused): the request's for an HTTP/1.1
  // upstream, then the response's, one after the other.
  virtual std::string& head_buffer() = 0;
  // Where the upstream's response head is read into (the connection's, reused: its memory
  // stays from one response to the next).
  virtual ResponseHead& response_head() = 0;
  // The watchdog the upstream's socket operations run under (null: the upstream
  // connection's own, for a front with no socket of its own per exchange).
  virtual Watchdog* watchdog() = 0;
  // An accepted upgrade (the upstream's 101 `head`): bytes relayed both ways until either
  // side ends; neither connection carries HTTP afterwards.
  virtual boost::asio::awaitable<void> tunnel(ResponseHead& head, UpstreamConnection& upstream) = 0;
};

// The upstream side: one request to one server, over the protocol the server speaks.
class UpstreamCall {
 public:
  // `streams`: see streams(); `response`: where the response's head goes (the front's).
  UpstreamCall(bool streams, ResponseHead& response) : response_(response), streams_(streams) {}
  virtual ~UpstreamCall() = default;
  struct Opened {
    bool ok = false;
    bool timeout = false;  // connecting timed out (504), else failed (502)
    std::string why;
  };
  // The server this attempt goes to (the driver's choice, again on a retry), before reuse().
  void to(ServerUse& use) { use_ = &use; }
  // A connection to the server that is open already (pooled), taken without a wait; false
  // when there is none: then open() makes one.
  virtual bool reuse() = 0;
  // A new connection to the server.
  virtual boost::asio::awaitable<Opened> open() = 0;
  // What a step came to: done; `retry`, when the request can safely go again on another
  // connection (the call says so only when nothing of it can have been processed), or the
  // status to answer (0: nothing can be, the client is gone).
  struct Step {
    bool ok = true;
    bool retry = false;
    bool timeout = false;  // the upstream timed out (counted toward its ejection)
    bool blame = false;    // another failure of the server's (counted toward its ejection)
    int answer = 0;
    std::string why;  // for the log (empty: nothing to log)
  };
  // What the request is like beyond its head.
  struct Shape {
    bool has_body = false;        // a body follows the head
    bool chunked = false;         // HTTP/1.1: the head says Transfer-Encoding: chunked
    bool takes_trailers = false;  // the client said TE: trailers
  };
  // The rewritten request head, staged (no wait): it leaves with the body's first piece, or
  // when the response is awaited (read_head) for a request without a body.
  virtual Step send_head(RequestHead& head, const Shape& shape) = 0;
  // A piece of the request's body; `last` ends it, with `trailers` (may be null).
  virtual boost::asio::awaitable<Step> send_body(std::span<const char> piece, bool last,
                                                 const Trailers* trailers) = 0;
  // The final response head (interim 1xx skipped; 101 only when an upgrade was asked for).
  virtual boost::asio::awaitable<Step> read_head(bool upgrade) = 0;
  ResponseHead& head() { return response_; }
  virtual ResponseBody body() const = 0;
  // None of the response's body is here yet: the head may go to the client at once rather
  // than with the body's first piece (when the front is eager, or the call streams).
  virtual bool head_first() const = 0;
  // A stream's body may come much later than its head (h2: the head goes at once).
  bool streams() const { return streams_; }
  // The next piece of the response's body into `into` (the front's scratch, or the call's).
  virtual boost::asio::awaitable<BodyRead> read_body(std::span<char> into) = 0;
  // The response's trailers once its body has ended (null: none); a trailers-only response
  // (gRPC) has them in its head.
  const Trailers* trailers() const { return trailers_; }
  // The response has been relayed whole: the connection may serve another request.
  virtual void done() = 0;
  // The HTTP/1.1 connection in use (null for h2): an accepted upgrade's, which then no longer
  // carries HTTP.
  virtual UpstreamConnection* connection() = 0;

 protected:
  const config::UpstreamServer& server() const { return use_->server(); }
  ResponseHead& response_;              // filled by read_head
  const Trailers* trailers_ = nullptr;  // set once the response's trailers are known

 private:
  const bool streams_;
  ServerUse* use_ = nullptr;
};

struct Forwarded {
  bool keep_alive = false;  // the client connection may carry another request
  // A status of ours the client must still be sent (nothing of a response reached it yet);
  // the connection closes after it. 0: nothing to send.
  int answer = 0;
};

// What a front hands an admitted exchange to: the worker's driver (driver.hpp), which takes
// `x` (from `front`) to a server of `up` and its response back to the front.
class Proxy {
 public:
  virtual ~Proxy() = default;
  virtual boost::asio::awaitable<Forwarded> forward(Front& front, Exchange& x,
                                                    const config::Upstream& up) = 0;
};

}  // namespace floodgate::http
