#include "session.hpp"

#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/http.hpp>

#include <array>
#include <optional>

#include "access_log.hpp"
#include "error_response.hpp"
#include "floodgate/http/router.hpp"
#include "floodgate/tls/contexts.hpp"
#include "forwarding.hpp"
#include "limit_gate.hpp"
#include "relay.hpp"
#include "transport.hpp"
#include "watchdog.hpp"
#include "wire.hpp"

namespace floodgate::http {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = beast::http;
using asio::as_tuple;
using asio::use_awaitable;
using tcp = asio::ip::tcp;
using RequestParser = bhttp::request_parser<bhttp::buffer_body>;
using ResponseParser = bhttp::response_parser<bhttp::buffer_body>;

namespace {

constexpr std::size_t kChunkSize = 16 * 1024;
constexpr std::uint64_t kUpstreamHeaderLimit = 64 * 1024;
constexpr std::chrono::milliseconds kAnswerWriteTimeout{10'000};
// How long a closing TLS connection waits for the client's close_notify after sending its
// own: long enough for a client that answers, short enough not to hold a dead one.
constexpr std::chrono::milliseconds kTlsCloseTimeout{1'000};

std::string lower_case(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool is_idempotent(bhttp::verb v) {
  return v == bhttp::verb::get || v == bhttp::verb::head || v == bhttp::verb::options ||
         v == bhttp::verb::put || v == bhttp::verb::delete_ || v == bhttp::verb::trace;
}

std::string peer_text(const tcp::socket& s) {
  boost::system::error_code ec;
  auto ep = s.remote_endpoint(ec);
  if (ec) return "0.0.0.0";
  auto a = ep.address();
  if (a.is_v6() && a.to_v6().is_v4_mapped())
    a = asio::ip::make_address_v4(asio::ip::v4_mapped, a.to_v6());
  return a.to_string();
}

// A parse error in the body (bad chunk framing and the like), as opposed to the client
// closing or stalling.
bool is_malformed_body(const beast::error_code& ec) {
  return ec.category() == bhttp::make_error_code(bhttp::error::bad_chunk).category() &&
         ec != bhttp::error::partial_message && ec != bhttp::error::end_of_stream &&
         ec != bhttp::error::need_buffer;
}

// A request the parser rejected (as opposed to a connection that closed, stalled or broke):
// only these are worth an answer.
bool is_protocol_error(const beast::error_code& ec) {
  return ec.category() == bhttp::make_error_code(bhttp::error::bad_method).category() &&
         ec != bhttp::error::end_of_stream && ec != bhttp::error::partial_message;
}

// The ways a reused keep-alive connection shows that its upstream closed it meanwhile.
bool is_stale_connection(const beast::error_code& ec) {
  return ec == bhttp::error::end_of_stream || ec == asio::error::connection_reset ||
         ec == asio::error::broken_pipe || ec == asio::ssl::error::stream_truncated;
}

bhttp::status status_for_read_error(const beast::error_code& ec) {
  if (ec == bhttp::error::header_limit) return bhttp::status::request_header_fields_too_large;
  if (ec == bhttp::error::body_limit) return bhttp::status::payload_too_large;
  return bhttp::status::bad_request;
}

bhttp::status status_for_upstream_error(const beast::error_code& ec) {
  return ec == beast::error::timeout ? bhttp::status::gateway_timeout : bhttp::status::bad_gateway;
}

// Returns a request's concurrency leases however its handling ends. The store is still there
// when it runs: a drain lets every session finish before the worker's context goes.
class LeaseGuard {
 public:
  explicit LeaseGuard(const Admission& a) : a_(a) {}
  ~LeaseGuard() {
    if (a_.store)
      for (const auto& lease : a_.leases) a_.store->release(lease);
  }
  LeaseGuard(const LeaseGuard&) = delete;
  LeaseGuard& operator=(const LeaseGuard&) = delete;

 private:
  const Admission& a_;
};

class Session final : public SessionRegistry::Entry {
 public:
  Session(tcp::socket socket, std::shared_ptr<const tls::ServerContexts> tls, WorkerContext& w)
      : Entry(w.sessions),
        peer_ip_(peer_text(socket)),
        peer_(config::parse_ip(peer_ip_).value_or(config::IpAddress{})),
        tls_(std::move(tls)),
        client_(std::move(socket)),
        watch_(client_.get_executor()),
        w_(w) {
    w_.metrics.active_connections.fetch_add(1, std::memory_order_relaxed);
  }
  ~Session() { w_.metrics.active_connections.fetch_sub(1, std::memory_order_relaxed); }
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // For a drain (SessionRegistry). Cancelling the read is enough: the session sees `draining`.
  void end_idle_wait() override {
    beast::error_code ignored;
    client_.socket().cancel(ignored);
  }
  // The client socket closed, every client operation fails at once; the watchdog times out
  // an upstream one (and the ones after it), so the session ends within a loop turn or two.
  void abort() override {
    beast::error_code ignored;
    client_.socket().close(ignored);
    watch_.expire();
  }

  asio::awaitable<void> run() {
    if (tls_ && !co_await handshake()) co_return;
    bool first = true;
    bool closed_idle = false;
    for (;;) {
      // A drain that begins between two requests finds the connection as idle as one waiting
      // for its next request (the last response was sent whole): closed the same way, without
      // waiting for the client's close_notify.
      if (w_.draining) {
        closed_idle = true;
        break;
      }
      auto config = w_.config.get();
      if (!first && buffer_.size() == 0 && !co_await wait_for_next_request(*config)) {
        if (!w_.draining) co_return;  // the client closed or stayed idle too long
        closed_idle = true;           // a drain ended the wait: say goodbye properly
        break;
      }
      first = false;
      RequestParser parser;
      parser.header_limit(static_cast<std::uint32_t>(config->server.max_header_bytes));
      parser.body_limit(config->server.max_body_bytes);
      watch_.guard(client_.socket(), config->server.timeouts.header_read);
      auto [read_ec, n] =
          co_await bhttp::async_read_header(client_, buffer_, parser, as_tuple(use_awaitable));
      if (auto ec = watch_.translate(read_ec)) {
        // A client that closes or stalls between requests gets nothing; a broken request
        // gets its status and the connection is closed (its remaining bytes are unframed).
        if (is_protocol_error(ec)) co_await send_error(status_for_read_error(ec), 11, false);
        co_return;
      }
      ++w_.in_flight;
      const auto started = config->log.access_log ? std::chrono::steady_clock::now()
                                                  : std::chrono::steady_clock::time_point{};
      if (config->log.access_log) arrived_ = w_.clock.now();
      settled_.clear();
      status_ = 0;
      upstream_took_ = {};
      logged_ = {};
      route_name_ = {};
      bool keep_alive = co_await serve(parser, *config);
      --w_.in_flight;
      if (config->log.access_log) access_log(*config, parser.get(), started);
      if (!keep_alive) break;
    }
    state = State::closing;
    if (client_.is_tls()) {
      // close_notify tells the client the response was not cut short (RFC 8446 section 6.1).
      // After a response the client's own close_notify is awaited, so that a request it sent
      // meanwhile does not turn our close into a reset that could destroy that response; an
      // idle connection a drain closes has no response to lose: ours is sent, theirs not
      // awaited (which RFC 8446 allows), and the drain is not held up by silent clients.
      if (closed_idle) SSL_set_shutdown(client_.tls_handle(), SSL_RECEIVED_SHUTDOWN);
      watch_.guard(client_.socket(), kTlsCloseTimeout);
      co_await client_.tls().async_shutdown(as_tuple(use_awaitable));
      watch_.relax();
    }
    beast::error_code ignored;
    client_.socket().shutdown(tcp::socket::shutdown_send, ignored);
  }

 private:
  // The TLS handshake, within the header_read timeout: a client that connects and says
  // nothing costs no more than one that never sends its request line.
  asio::awaitable<bool> handshake() {
    SSL* ssl = tls_->new_connection();
    if (!ssl) co_return false;
    client_.start_tls(ssl);
    watch_.guard(client_.socket(), w_.config.get()->server.timeouts.header_read);
    auto [ec] = co_await client_.tls().async_handshake(asio::ssl::stream_base::server,
                                                       as_tuple(use_awaitable));
    if (ec) {
      w_.metrics.tls_handshake_failures.fetch_add(1, std::memory_order_relaxed);
      w_.log.debug("TLS handshake with {} failed: {}", peer_ip_, watch_.translate(ec).message());
      co_return false;
    }
    co_return true;
  }

  // Waits for the first byte of a keep-alive connection's next request within the idle
  // timeout; only then does the header_read clock start.
  asio::awaitable<bool> wait_for_next_request(const config::Config& config) {
    watch_.guard(client_.socket(), config.server.timeouts.idle);
    state = State::idle;  // a drain may end this wait at once (SessionRegistry)
    auto [ec, n] =
        co_await client_.async_read_some(buffer_.prepare(kChunkSize), as_tuple(use_awaitable));
    state = State::busy;
    if (ec) co_return false;
    buffer_.commit(n);
    co_return true;
  }

  // One JSON line per request (see access_log.hpp). `config`: the snapshot the request was
  // served under.
  void access_log(const config::Config& config, const bhttp::request<bhttp::buffer_body>& req,
                  std::chrono::steady_clock::time_point started) {
    AccessEntry e{config,
                  req,
                  peer_ip_,
                  peer_,
                  route_name_,
                  status_,
                  logged_.decision,
                  logged_.limit,
                  logged_.key,
                  arrived_,
                  std::chrono::steady_clock::now() - started,
                  upstream_took_,
                  settled_};
    w_.access_log->info("{}", access_line(e, hasher_for(w_, config)));
  }

  void remember_for_log(const Admission& a) { logged_ = {a.decision, a.limit, a.key}; }

  asio::awaitable<bool> send(const Answer& a) {
    status_ = static_cast<int>(a.status);
    watch_.guard(client_.socket(), kAnswerWriteTimeout);
    auto [ec, n] =
        co_await asio::async_write(client_, asio::buffer(a.bytes), as_tuple(use_awaitable));
    co_return !ec && a.keep_alive;
  }

  asio::awaitable<bool> send_error(bhttp::status status, unsigned version, bool keep_alive) {
    co_return co_await send(error_response(status, version, keep_alive));
  }

  // Decides what to do with one request whose header has been read. Returns whether the
  // connection may carry another request.
  asio::awaitable<bool> serve(RequestParser& parser, const config::Config& config) {
    auto& req = parser.get();
    if (!framing_is_safe(req, parser.chunked()))
      co_return co_await send_error(bhttp::status::bad_request, 11, false);
    auto target = parse_target(req.target());
    if (!target) co_return co_await send_error(bhttp::status::bad_request, req.version(), false);
    // The body, if any, is still unread: a refusal must close, or its bytes would be read
    // as the next request.
    bool can_continue = req.keep_alive() && parser.is_done();
    std::string_view host =
        target->authority.empty() ? std::string_view(req[bhttp::field::host]) : target->authority;
    // Routed, keyed and forwarded by one spelling of the path, so no variant of it walks
    // around a limit (path_normalize.hpp).
    std::string normal_target;
    auto normal = normalize_target(*target, normal_target);
    if (!normal)
      co_return co_await send_error(bhttp::status::bad_request, req.version(), can_continue);
    const auto* route = match_route(config, req.method_string(), host, target->path);
    if (refuses_encoded_separators(normal, route))
      co_return co_await send_error(bhttp::status::bad_request, req.version(), can_continue);
    if (!route)
      co_return co_await send_error(bhttp::status::not_found, req.version(), can_continue);
    route_name_ = route->name;
    GateResult gate;
    if (!route->limits.empty()) {
      // Routes compare it case-insensitively and keys lower-case it: the name part is enough.
      GateInput in{req,   req.method_string(), host_name(host), target->path, target->query,
                   peer_, req.version(),       can_continue};
      gate = co_await apply_limits(w_, config, *route, in);
      if (config.log.access_log) remember_for_log(gate.admission);
      if (gate.answer) co_return co_await send(*gate.answer);
    }
    // Held until the response (or the WebSocket tunnel) ends: an open tunnel keeps counting
    // against a concurrency limit.
    LeaseGuard leases(gate.admission);
    // A drain past its deadline may have closed the client while the store decided.
    if (!client_.socket().is_open()) co_return false;
    co_return co_await forward(parser, config, config.upstream_of(*route), *target, gate.admission);
  }

  // Rewrites the request header in place for the upstream.
  void prepare_upstream_request(RequestParser& parser, const config::Config& config,
                                const config::Upstream& u, const Target& target, bool upgrade) {
    auto& req = parser.get();
    auto content_length = parser.content_length();
    bool chunked = parser.chunked();
    if (!target.authority.empty()) req.set(bhttp::field::host, target.authority);
    // An HTTP/1.0 client may omit Host; what we send is HTTP/1.1, which must carry one
    // (RFC 9112 section 3.2): the upstream's own authority, as nginx's $proxy_host.
    if (req.find(bhttp::field::host) == req.end())
      req.set(bhttp::field::host,
              (u.host.find(':') != std::string::npos ? "[" + u.host + "]" : u.host) + ":" +
                  std::to_string(u.port));
    if (target.origin_form != std::string_view(req.target()))  // normalized (or origin-form)
      req.target(std::string(target.origin_form));
    strip_hop_by_hop(req);
    if (upgrade) {  // the one hop-by-hop pair we pass on (RFC 9110 section 7.8)
      req.set(bhttp::field::connection, "Upgrade");
      req.set(bhttp::field::upgrade, "websocket");
    }
    req.erase(bhttp::field::expect);  // answered by us: see forward()
    add_forwarding_headers(req, {peer_ip_, client_.is_tls(), config.server.pop});
    req.version(11);
    if (content_length)
      req.content_length(*content_length);
    else if (chunked)
      req.chunked(true);
  }

  // Sends the request (header and body) to an upstream connection.
  asio::awaitable<RelayResult> send_request(RequestParser& parser, UpstreamConnection& conn,
                                            const config::Upstream& u, bool expect_continue,
                                            const config::Config& config) {
    if (expect_continue && !parser.is_done()) {
      static constexpr std::string_view cont = "HTTP/1.1 100 Continue\r\n\r\n";
      watch_.guard(client_.socket(), config.server.timeouts.idle);
      auto [cec, cn] =
          co_await asio::async_write(client_, asio::buffer(cont), as_tuple(use_awaitable));
      if (cec) co_return RelayResult{RelayResult::Side::read, watch_.translate(cec)};
    }
    head_.clear();
    append_head(head_, parser.get());
    co_return co_await relay_message(RelayLeg{client_, config.server.timeouts.idle}, buffer_,
                                     parser, RelayLeg{conn.stream, u.response_timeout}, head_,
                                     parser.chunked() ? BodyFraming::chunked : BodyFraming::raw,
                                     std::span(chunk_), watch_);
  }

  // Reads the upstream's final response header, skipping interim 1xx responses.
  asio::awaitable<beast::error_code> read_response_header(UpstreamConnection& conn,
                                                          const config::Upstream& u,
                                                          std::optional<ResponseParser>& rp,
                                                          bool head, bool upgrade) {
    for (;;) {
      rp.emplace();
      rp->header_limit(kUpstreamHeaderLimit);
      rp->body_limit(boost::none);
      rp->skip(head);
      watch_.guard(conn.stream.socket(), u.response_timeout);
      auto [read_ec, n] =
          co_await bhttp::async_read_header(conn.stream, conn.buffer, *rp, as_tuple(use_awaitable));
      if (auto ec = watch_.translate(read_ec)) co_return ec;
      auto code = rp->get().result_int();
      if (code >= 200) co_return beast::error_code{};
      // 101 is final for an upgrade we asked for; anything else switching protocols on a
      // request that did not ask is a broken upstream.
      if (code == 101) co_return upgrade ? beast::error_code{} : bhttp::error::bad_version;
    }
  }

  asio::awaitable<bool> forward(RequestParser& parser, const config::Config& config,
                                const config::Upstream& u, const Target& target,
                                const Admission& admission) {
    auto& req = parser.get();
    const unsigned version = req.version();
    bool client_keep_alive = req.keep_alive();
    const bool has_body = !parser.is_done();
    const bool expect_continue = beast::iequals(req[bhttp::field::expect], "100-continue");
    const bool head = req.method() == bhttp::verb::head;
    const bool retryable = !has_body && is_idempotent(req.method());
    const bool upgrade = !has_body && is_websocket_upgrade(req);
    prepare_upstream_request(parser, config, u, target, upgrade);

    std::optional<ResponseParser> rp;
    UpstreamConnectionPtr conn;
    // Declared after conn, so it runs first: the watchdog never outlives the socket it guards.
    struct Unguard {
      Watchdog& w;
      ~Unguard() { w.relax(); }
    } unguard{watch_};
    for (int attempt = 0;; ++attempt) {
      conn = w_.pool.take(u);
      if (!conn) {
        auto fresh = co_await w_.pool.connect(u, watch_);
        if (fresh.error) {
          auto& stats = w_.upstream_stats(u.name);
          (fresh.error == beast::error::timeout ? stats.timeouts : stats.connect_errors)
              .fetch_add(1, std::memory_order_relaxed);
          if (auto quiet = w_.upstream_errors.allow(); quiet >= 0)
            w_.log.warn("upstream {} ({}): connect failed: {} ({} similar lines suppressed)",
                        u.name, u.url, fresh.why, quiet);
          co_return co_await send_error(status_for_upstream_error(fresh.error), version, false);
        }
        conn = std::move(fresh.conn);
      }
      const auto sent_at = std::chrono::steady_clock::now();
      auto sent = co_await send_request(parser, *conn, u, expect_continue, config);
      if (sent.failed == RelayResult::Side::read) {
        // Nothing of a response has reached the client yet: a body that broke the framing
        // gets its status (the upstream connection, with a partial request, is dropped).
        if (sent.error == bhttp::error::body_limit)
          co_await send_error(bhttp::status::payload_too_large, version, false);
        else if (is_malformed_body(sent.error))
          co_await send_error(bhttp::status::bad_request, version, false);
        co_return false;  // or the client went away or stalled mid-body
      }
      beast::error_code ec = sent.error;
      if (!ec) ec = co_await read_response_header(*conn, u, rp, head, upgrade);
      if (!ec) {
        upstream_took_ = std::chrono::steady_clock::now() - sent_at;
        auto& stats = w_.upstream_stats(u.name);
        stats.latency.observe(std::chrono::duration<double>(upstream_took_).count());
        stats.by_class[std::min<unsigned>(5, rp->get().result_int() / 100)].fetch_add(
            1, std::memory_order_relaxed);
        break;
      }
      // A pooled connection the upstream closed just as we reused it: safe to try once more
      // on a new one, but only when nothing of a body has been consumed.
      if (conn->reused && retryable && attempt == 0 && is_stale_connection(ec)) continue;
      if (ec == beast::error::timeout)
        w_.upstream_stats(u.name).timeouts.fetch_add(1, std::memory_order_relaxed);
      if (auto quiet = w_.upstream_errors.allow(); quiet >= 0)
        w_.log.warn("upstream {} ({}): {} ({} similar lines suppressed)", u.name, u.url,
                    ec.message(), quiet);
      co_return co_await send_error(status_for_upstream_error(ec), version, false);
    }
    if (rp->get().result() == bhttp::status::switching_protocols)
      co_return co_await tunnel(*rp, *conn, config, admission);
    co_return co_await send_response(*rp, std::move(conn), u, version,
                                     client_keep_alive && parser.is_done(), config, admission);
  }

  // After the upstream accepted a WebSocket upgrade: sends its 101 on, then relays bytes both
  // ways, unchanged, until either side closes or both are silent for the idle timeout. The
  // connection is then closed (it no longer carries HTTP), as is the upstream's.
  asio::awaitable<bool> tunnel(ResponseParser& rp, UpstreamConnection& conn,
                               const config::Config& config, const Admission& admission) {
    using namespace asio::experimental::awaitable_operators;
    auto& res = rp.get();
    strip_hop_by_hop(res);
    res.set(bhttp::field::connection, "Upgrade");
    res.set(bhttp::field::upgrade, "websocket");
    for (const auto& [name, value] : admission.headers) res.set(name, value);
    status_ = 101;
    head_.clear();
    append_head(head_, res);
    // Bytes that arrived behind either head already belong to the tunnel.
    std::array<asio::const_buffer, 2> to_client{asio::buffer(head_), conn.buffer.data()};
    watch_.guard(client_.socket(), config.server.timeouts.idle);
    auto [wec, wn] = co_await asio::async_write(client_, to_client, as_tuple(use_awaitable));
    if (wec) co_return false;
    conn.buffer.consume(conn.buffer.size());
    if (buffer_.size() > 0) {
      watch_.guard(conn.stream.socket(), config.server.timeouts.idle);
      auto [uec, un] =
          co_await asio::async_write(conn.stream, buffer_.data(), as_tuple(use_awaitable));
      if (uec) co_return false;
      buffer_.consume(buffer_.size());
    }
    watch_.relax();  // the tunnel keeps its own idle clock: two directions, one deadline
    w_.metrics.active_tunnels.fetch_add(1, std::memory_order_relaxed);
    auto last_activity = std::chrono::steady_clock::now();
    auto upstream_chunk = std::make_unique<std::array<char, kChunkSize>>();
    co_await (pump(client_, conn.stream, std::span(chunk_), last_activity) ||
              pump(conn.stream, client_, std::span(*upstream_chunk), last_activity) ||
              idle_watch(config.server.timeouts.idle, last_activity, client_, conn.stream));
    w_.metrics.active_tunnels.fetch_sub(1, std::memory_order_relaxed);
    co_return false;
  }

  // Copies one direction of a tunnel until a read or write fails (EOF included).
  static asio::awaitable<void> pump(Transport& from, Transport& to, std::span<char> buffer,
                                    std::chrono::steady_clock::time_point& last_activity) {
    for (;;) {
      auto [rec, n] = co_await from.async_read_some(asio::buffer(buffer.data(), buffer.size()),
                                                    as_tuple(use_awaitable));
      if (rec) break;
      last_activity = std::chrono::steady_clock::now();
      auto [wec, wn] =
          co_await asio::async_write(to, asio::buffer(buffer.data(), n), as_tuple(use_awaitable));
      if (wec) break;
    }
    // Ends the other direction too, even if a layer below ignored the cancellation signal.
    beast::error_code ignored;
    from.socket().cancel(ignored);
    to.socket().cancel(ignored);
  }

  // Completes once neither direction has moved a byte for `idle`, and stops both.
  static asio::awaitable<void> idle_watch(std::chrono::milliseconds idle,
                                          const std::chrono::steady_clock::time_point& last,
                                          Transport& a, Transport& b) {
    asio::steady_timer timer(co_await asio::this_coro::executor);
    for (;;) {
      timer.expires_at(last + idle);
      auto [ec] = co_await timer.async_wait(as_tuple(use_awaitable));
      if (ec) co_return;  // cancelled: the tunnel ended by itself
      if (std::chrono::steady_clock::now() >= last + idle) break;
    }
    beast::error_code ignored;
    a.socket().cancel(ignored);
    b.socket().cancel(ignored);
  }

  asio::awaitable<bool> send_response(ResponseParser& rp, UpstreamConnectionPtr conn,
                                      const config::Upstream& u, unsigned version, bool keep_alive,
                                      const config::Config& config, const Admission& admission) {
    auto& res = rp.get();
    const bool upstream_keep_alive = rp.keep_alive();
    const auto content_length = rp.content_length();
    const bool has_body = !rp.is_done();
    settle_from_response(admission, res, w_.deny);
    if (config.log.access_log && !config.log.replay_fields.empty())
      for (const auto& settle : admission.settles)
        if (auto it = res.find(settle.header); it != res.end())
          settled_.emplace_back(lower_case(settle.header), std::string(it->value()));
    strip_hop_by_hop(res);
    for (const auto& [name, value] : admission.headers) res.set(name, value);
    auto framing = BodyFraming::raw;
    if (content_length) {
      res.content_length(*content_length);
    } else if (has_body) {
      if (version >= 11) {
        res.chunked(true);
        framing = BodyFraming::chunked;
      } else {
        keep_alive = false;  // HTTP/1.0 without a length: the body ends with the connection
      }
    }
    res.version(version);
    res.keep_alive(keep_alive);
    status_ = res.result_int();
    head_.clear();
    append_head(head_, res);
    auto relayed = co_await relay_message(RelayLeg{conn->stream, u.response_timeout}, conn->buffer,
                                          rp, RelayLeg{client_, config.server.timeouts.idle}, head_,
                                          framing, std::span(chunk_), watch_);
    if (!relayed) {
      if (relayed.failed == RelayResult::Side::read && !relayed.head_written) {
        // Nothing reached the client yet: it can still be told what happened.
        co_return co_await send_error(status_for_upstream_error(relayed.error), version, false);
      }
      if (relayed.failed == RelayResult::Side::read)
        if (auto quiet = w_.upstream_errors.allow(); quiet >= 0)
          w_.log.warn("upstream {} ({}): response body: {} ({} similar lines suppressed)", u.name,
                      u.url, relayed.error.message(), quiet);
      co_return false;  // the client has a partial response: closing is the only honest end
    }
    if (upstream_keep_alive && conn->buffer.size() == 0) w_.pool.give_back(u, std::move(conn));
    co_return keep_alive;
  }

  std::string peer_ip_;
  config::IpAddress peer_;
  // The current request, for the access log.
  int status_ = 0;
  std::chrono::steady_clock::duration upstream_took_{};
  struct Logged {
    std::string_view decision;
    std::string limit;
    std::string key;
  } logged_;
  std::string_view route_name_;
  limit::Micros arrived_ = 0;
  std::vector<std::pair<std::string, std::string>> settled_;
  std::shared_ptr<const tls::ServerContexts> tls_;  // the listener's, as accepted; null: plain
  Transport client_;
  Watchdog watch_;  // every socket operation of this connection runs under its deadline
  beast::flat_buffer buffer_;
  std::string head_;  // the message head being relayed, serialized (reused)
  WorkerContext& w_;
  std::array<char, kChunkSize> chunk_;  // the one body buffer of this connection
};

}  // namespace

asio::awaitable<void> run_session(tcp::socket socket,
                                  std::shared_ptr<const tls::ServerContexts> tls,
                                  WorkerContext& worker) {
  Session session(std::move(socket), std::move(tls), worker);
  co_await session.run();
}

}  // namespace floodgate::http
