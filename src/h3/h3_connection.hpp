#pragma once
// An HTTP/3 client connection (RFC 9114) over QUIC (RFC 9000/9001): one ngtcp2_conn with its
// TLS 1.3 handshake in GnuTLS (ngtcp2's crypto helper) and one nghttp3_conn over its streams.
// Every request stream becomes an Exchange and goes through the same pipeline and the same
// proxy driver as an HTTP/1.1 request or an HTTP/2 stream, through its Front (h3_front.hpp).
//
// One worker thread only. The endpoint hands it datagrams (feed); one coroutine (run) writes
// what ngtcp2 and nghttp3 have to send, and waits on one timer for ngtcp2's next expiry or
// for a change (kick). ngtcp2 and nghttp3 call back from inside feed and the writer; no
// exception crosses those callbacks (each body catches and returns a library error code).

#include <gnutls/gnutls.h>
#include <nghttp3/nghttp3.h>
#include <ngtcp2/ngtcp2.h>
#include <ngtcp2/ngtcp2_crypto.h>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/udp.hpp>
#include <boost/asio/steady_timer.hpp>

#include <array>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "exchange/exchange.hpp"
#include "exchange/header_block.hpp"
#include "exchange/services.hpp"
#include "floodgate/tls/quic_credentials.hpp"
#include "net/connection_budget.hpp"
#include "net/reset_budget.hpp"
#include "net/scratch_pool.hpp"
#include "net/session_registry.hpp"

namespace floodgate::http {

class QuicEndpoint;

// One request stream, shared by the connection (which feeds it from nghttp3's callbacks) and
// the coroutine that serves it.
struct H3Stream {
  H3Stream(std::int64_t id, boost::asio::any_io_executor ex) : id(id), wake(ex), wake_out(ex) {}
  std::int64_t id;
  // The request head, as received.
  std::string method, scheme, authority, path;
  bool extended_connect = false;  // :protocol: not something floodgate forwards
  RequestHead head;               // regular fields, names lower-case; becomes the upstream's
  std::string cookies;            // cookie fields joined with "; " (RFC 9114 4.2.1)
  std::size_t header_bytes = 0;   // as SETTINGS_MAX_FIELD_SECTION_SIZE counts them
  bool head_done = false;
  // The request body: bytes received and not yet forwarded; the client's flow-control windows
  // reopen only as they are forwarded, so a client can be at most one window ahead.
  std::string body;
  bool body_done = false;     // the stream's FIN seen
  Fields trailers;            // the request's trailers, when it has any
  bool in_trailers = false;   // the trailer section is being received
  bool discard_body = false;  // answered without the upstream: its DATA is consumed on arrival
  // The response body: pieces nghttp3 reads by reference and may send again until they are
  // acknowledged, so each stays where it is until then; at most kMaxOut unacknowledged bytes
  // wait before the upstream is read again.
  static constexpr std::size_t kMaxOut = 64 * 1024;
  std::deque<std::string> out;
  std::size_t out_given = 0;  // pieces of `out` handed to nghttp3 (from its front)
  std::size_t out_acked = 0;  // bytes of out.front() acknowledged
  std::size_t out_bytes = 0;  // bytes in `out` not acknowledged
  std::size_t out_waiting() const { return out_bytes; }
  void queue_out(std::span<const char> piece) {
    out.emplace_back(piece.data(), piece.size());
    out_bytes += piece.size();
  }
  bool out_done = false;
  bool out_blocked = false;  // nghttp3 was told there is nothing yet: resume it on more
  Fields out_trailers;       // sent after the body, when out_done
  bool responded = false;    // a response head was submitted
  bool closed = false;       // the stream ended both ways, or was reset
  std::uint64_t close_code = 0;
  bool reset_submitted = false;  // by us
  bool task_done = false;        // the serving coroutine has ended
  // As H2Stream's: `wake` for the coroutine serving the stream, `wake_out` for a reader of its
  // body running beside a writer.
  boost::asio::steady_timer wake;
  boost::asio::steady_timer wake_out;
  void notify() {
    wake.cancel();
    wake_out.cancel();
  }
  UpstreamConnection* upstream = nullptr;  // while one is in use: closed by an abort
  Exchange x;
};

class H3Connection final : public SessionRegistry::Entry {
 public:
  H3Connection(QuicEndpoint& endpoint, Services& w, ConnectionBudget::Slot slot,
               std::shared_ptr<const tls::QuicCredentials> credentials,
               const boost::asio::ip::udp::endpoint& local,
               const boost::asio::ip::udp::endpoint& peer);
  ~H3Connection();
  H3Connection(const H3Connection&) = delete;
  H3Connection& operator=(const H3Connection&) = delete;

  // Sets up the QUIC connection for the client's first Initial (`hd`); `original_dcid`: the
  // DCID of the Initial before a Retry (null: none was sent). False when it cannot be.
  bool init(const ngtcp2_pkt_hd& hd, const ngtcp2_cid* original_dcid);
  // A datagram for this connection from `from`.
  void feed(const boost::asio::ip::udp::endpoint& from, std::span<const std::uint8_t> packet);
  // Writes, waits and handles timers until the connection is over and every stream's
  // coroutine has ended.
  boost::asio::awaitable<void> run();

  // SessionRegistry::Entry: a drain.
  void end_idle_wait() override { kick(); }
  void abort() override;

  // For the stream coroutines (h3_stream.cpp, h3_front.cpp).
  void submit_reply(H3Stream& s, Reply reply);
  void submit_head(H3Stream& s, HeaderBlock& head, bool has_body);
  void resume(H3Stream& s);                   // more of s.out (or its end) is there
  void consumed(H3Stream& s, std::size_t n);  // n body bytes forwarded: the windows reopen
  void reset(H3Stream& s, std::uint64_t code);
  // The client took none of the stream's response (or sent none of its body) for the idle
  // timeout: the stream is reset.
  void stalled(H3Stream& s);
  // For the stream front: DATA past content-length, and a response cut short by the upstream.
  void reset_malformed(H3Stream& s) { reset(s, NGHTTP3_H3_MESSAGE_ERROR); }
  void reset_aborted(H3Stream& s) { reset(s, NGHTTP3_H3_INTERNAL_ERROR); }
  void kick();  // something changed: the writer runs
  std::unique_ptr<ScratchPool::Scratch> take_scratch() { return scratch_.take(); }
  void give_back(std::unique_ptr<ScratchPool::Scratch> s) { scratch_.give_back(std::move(s)); }

 private:
  friend struct H3Callbacks;
  bool setup_tls();
  bool setup_http3();  // once the 1-RTT keys are there
  void write();        // everything ngtcp2 and nghttp3 may send now
  void send_close();   // CONNECTION_CLOSE with last_error_, once
  void closed_all_streams();
  void start_stream(std::shared_ptr<H3Stream> s);
  boost::asio::awaitable<void> serve(std::shared_ptr<H3Stream> s);
  void take_head(H3Stream& s);
  void stream_task_ended(H3Stream& s);
  void extend_streams();  // a client stream is over: one more may be opened
  // A stream the client reset, or made floodgate reset with a malformed message: charged to
  // the reset budget, and past it the connection ends (H3_EXCESSIVE_LOAD).
  void charge_reset();
  ngtcp2_path path_to(const boost::asio::ip::udp::endpoint& remote);

  QuicEndpoint& ep_;
  Services& w_;
  ConnectionBudget::Slot slot_;
  std::shared_ptr<const tls::QuicCredentials> credentials_;  // as accepted: a reload keeps them
  boost::asio::ip::udp::endpoint local_;
  boost::asio::ip::udp::endpoint peer_addr_;
  std::string peer_ip_;
  config::IpAddress peer_;
  config::ConfigPtr config_;  // the snapshot at accept: transport settings
  ngtcp2_conn* conn_ = nullptr;
  nghttp3_conn* h3_ = nullptr;
  gnutls_session_t tls_ = nullptr;
  ngtcp2_crypto_conn_ref conn_ref_{};
  tls::Fingerprints fingerprints_;  // the ClientHello's, when the snapshot uses them
  tls::QuicHandshake handshake_;    // what the session's TLS callbacks reach
  ngtcp2_ccerr last_error_{};
  std::vector<ngtcp2_cid> own_cids_;  // in the endpoint's map besides those ngtcp2 issued
  std::map<std::int64_t, std::shared_ptr<H3Stream>> streams_;
  boost::asio::steady_timer timer_;       // ngtcp2's expiry, or a kick
  boost::asio::steady_timer tasks_done_;  // cancelled as the last stream coroutine ends
  int tasks_ = 0;
  bool handshaking_ = true;  // counted in the endpoint's handshakes under way
  bool done_ = false;        // nothing more is sent or received
  bool close_sent_ = false;
  bool goaway_sent_ = false;
  bool close_pending_ = false;  // decided inside a callback: closed once it has returned
  std::size_t max_header_bytes_;
  ResetBudget resets_;
  ScratchPool scratch_;
};

}  // namespace floodgate::http
