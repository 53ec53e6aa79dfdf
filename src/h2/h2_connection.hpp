#pragma once
// An HTTP/2 client connection (RFC 9113), framed by Debian's libnghttp2: one nghttp2_session
// driven with mem_recv/mem_send over the connection's Transport (plain h2c or TLS h2). Every
// stream becomes an Exchange and goes through the same pipeline as an HTTP/1.1 request
// (pipeline.hpp); upstreams stay pooled HTTP/1.1 connections (h2_stream.cpp).
//
// One worker thread only. nghttp2 calls back from inside mem_recv/mem_send; no exception
// crosses those callbacks (each body catches and returns an nghttp2 error code).

#include <nghttp2/nghttp2.h>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/container/small_vector.hpp>

#include <array>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "exchange/exchange.hpp"
#include "exchange/services.hpp"
#include "exchange/stream_service.hpp"
#include "h2_header_block.hpp"
#include "net/reset_budget.hpp"
#include "net/scratch_pool.hpp"
#include "net/session_registry.hpp"
#include "net/transport.hpp"
#include "net/watchdog.hpp"
#include "upstream_h2.hpp"  // H2Fields

namespace floodgate::http {

// One request stream, shared by the connection (which feeds it from nghttp2's callbacks) and
// the coroutine that serves it.
struct H2Stream {
  explicit H2Stream(std::int32_t id, boost::asio::any_io_executor ex)
      : id(id), wake(ex), wake_out(ex) {}
  std::int32_t id;
  // The request head, as received.
  std::string method, scheme, authority, path;
  bool extended_connect = false;  // :protocol (RFC 8441): not something floodgate forwards
  // The regular fields, names lower-case (nghttp2 checks); method and target are set when
  // it is forwarded, and it becomes the upstream's head, changed in place as HTTP/1.1's is.
  RequestHead head;
  std::string cookies;           // cookie fields joined with "; " (RFC 9113 8.2.3)
  std::size_t header_bytes = 0;  // as SETTINGS_MAX_HEADER_LIST_SIZE counts them
  bool head_done = false;
  // The request body: bytes received and not yet forwarded; consumed from the flow-control
  // window only as they are forwarded, so a client can be at most one window ahead.
  std::string body;
  bool body_done = false;  // END_STREAM seen
  H2Fields trailers;       // the request's trailers, when it has any (forwarded to an h2 upstream)
  bool discard_body = false;  // answered without the upstream: DATA is consumed on arrival
  // The response body nghttp2 reads from (its data provider), and whether it ends there;
  // an upstream is read only while fewer than kMaxOut bytes wait for the client's window.
  static constexpr std::size_t kMaxOut = 64 * 1024;
  std::string out;
  std::size_t out_sent = 0;
  bool out_done = false;
  std::size_t out_waiting() const { return out.size() - out_sent; }
  void queue_out(std::span<const char> piece) { out.append(piece.data(), piece.size()); }
  H2Fields out_trailers;   // sent after the body, when out_done (an h2 upstream's trailers)
  bool responded = false;  // a response head was submitted
  bool closed = false;     // nghttp2 closed the stream (sent END_STREAM both ways, or reset)
  std::uint32_t close_code = 0;
  bool reset_submitted = false;  // by us: RST_STREAM is on its way
  bool reset_uncharged = false;  // reset by us for a stall or an upstream's failure (ResetCause)
  // Cancelled whenever something above changes: `wake` for the coroutine serving the stream
  // (and for its reading of the body), `wake_out` for a writer of its response running
  // beside that reader (a full-duplex exchange), so that neither wait cancels the other.
  boost::asio::steady_timer wake;
  boost::asio::steady_timer wake_out;
  void notify() {
    wake.cancel();
    wake_out.cancel();
  }
  UpstreamConnection* upstream = nullptr;  // while one is in use: closed by an abort
  Exchange x;
};

// Why floodgate resets a stream. Only a reset the client's frames caused is counted against the
// connection's reset budget: a stall costs the client the idle timeout per stream (bounded by
// max_concurrent_streams), and an upstream's failure is not the client's doing.
enum class ResetCause { client_frames, stall, upstream };

class H2Connection {
 public:
  // `service`: every stream is answered by it (rls.listen) instead of being routed and
  // proxied; null: proxied.
  H2Connection(Services& w, Transport& client, Watchdog& watch, std::string_view peer_ip,
               const config::IpAddress& peer, SessionRegistry::Entry& entry,
               StreamService* service = nullptr, std::string_view alt_svc = {});
  ~H2Connection();
  H2Connection(const H2Connection&) = delete;
  H2Connection& operator=(const H2Connection&) = delete;

  // Serves the connection until it closes; `already` holds bytes read before HTTP/2 was
  // known (the prior-knowledge preface). Returns once every stream's coroutine has ended.
  boost::asio::awaitable<void> run(boost::beast::flat_buffer& already);
  // Closes every stream's upstream connection (a drain past its deadline).
  void abort_streams();

  // For the stream coroutines (h2_stream.cpp).
  // An answer of ours (reply.hpp) as HEADERS and DATA; it becomes the exchange's status.
  void submit_reply(H2Stream& s, Reply reply);  // with the stream's request id
  void submit_head(H2Stream& s, H2HeaderBlock& head, bool has_body);
  void resume(H2Stream& s);                   // more of s.out (or its end) is there
  void consumed(H2Stream& s, std::size_t n);  // n body bytes forwarded: the window reopens
  void reset(H2Stream& s, std::uint32_t code, ResetCause cause = ResetCause::client_frames);
  // The client took none of the stream's response (or sent none of its body) for the idle
  // timeout: the stream is reset (CANCEL) and counted.
  void stalled(H2Stream& s);
  // For the stream front: DATA past content-length (the client's doing), and a response cut
  // short by the upstream (not the client's).
  void reset_malformed(H2Stream& s) { reset(s, NGHTTP2_PROTOCOL_ERROR); }
  void reset_aborted(H2Stream& s) { reset(s, NGHTTP2_INTERNAL_ERROR, ResetCause::upstream); }
  void kick();  // something was submitted: the writer sends it
  std::string_view peer_ip() const { return peer_ip_; }
  const config::IpAddress& peer() const { return peer_; }
  bool tls() { return client_.is_tls(); }
  // A stream's body buffer, kept for the connection's next stream when given back.
  std::unique_ptr<ScratchPool::Scratch> take_scratch() { return scratch_.take(); }
  void give_back(std::unique_ptr<ScratchPool::Scratch> s) { scratch_.give_back(std::move(s)); }

 private:
  friend struct H2Callbacks;
  boost::asio::awaitable<void> read_loop(boost::beast::flat_buffer& already);
  boost::asio::awaitable<void> write_loop();
  boost::asio::awaitable<void> serve(std::shared_ptr<H2Stream> s);
  // The stream's head into its exchange (snapshot, arrival, fields, peer, request id).
  void take_head(H2Stream& s);
  void start_stream(std::shared_ptr<H2Stream> s);
  // A stream closed with an error the client caused: charged to the reset budget, and past
  // it the connection ends (GOAWAY ENHANCE_YOUR_CALM).
  void charge_reset();
  void update_state();
  bool heads_pending() const;  // a stream whose header block is still arriving

  Services& w_;
  StreamService* service_;
  Transport& client_;
  Watchdog& watch_;       // the reader's deadline (the session's watchdog)
  Watchdog write_watch_;  // the writer's: a client that stops reading cannot hold us
  std::size_t max_header_bytes_;
  std::string peer_ip_;
  config::IpAddress peer_;
  std::string_view alt_svc_;  // the listener's Alt-Svc (h3), for every answer
  SessionRegistry::Entry& entry_;
  nghttp2_session* session_ = nullptr;
  std::map<std::int32_t, std::shared_ptr<H2Stream>> streams_;
  boost::asio::steady_timer write_wake_;
  boost::asio::steady_timer tasks_done_;
  int tasks_ = 0;         // stream coroutines still running
  bool closing_ = false;  // the read side ended: flush what is left, then stop
  bool goaway_sent_ = false;
  int empty_frames_ = 0;  // DATA frames in a row that carried nothing and ended nothing
  ResetBudget resets_;
  bool flooded_ = false;         // resets_ ran out: the connection is ending with ENHANCE_YOUR_CALM
  std::int32_t peer_reset_ = 0;  // the stream of the RST_STREAM being received, if any
  // Stream coroutines this connection may have running at once: a stream counts until its
  // upstream work has ended, not only while nghttp2 has it open, so a client that has its
  // streams reset (by itself or by us) cannot stack up work beyond SETTINGS_MAX_CONCURRENT_STREAMS.
  int max_tasks_;
  std::string outbuf_;
  ScratchPool scratch_;
};

}  // namespace floodgate::http
