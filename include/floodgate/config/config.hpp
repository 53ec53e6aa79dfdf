#pragma once
// The validated, immutable configuration. A Config is only ever built by the loader
// (parse -> validate everything -> freeze) and then shared as std::shared_ptr<const Config>;
// a request keeps the snapshot it started with, a reload publishes a new one.

#include <algorithm>
#include <bitset>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "floodgate/calendar/period.hpp"
#include "floodgate/config/address.hpp"
#include "floodgate/config/cidr_set.hpp"
#include "floodgate/config/log.hpp"
#include "floodgate/config/remote.hpp"
#include "floodgate/config/rls.hpp"
#include "floodgate/config/store.hpp"
#include "floodgate/config/units.hpp"

// OpenSSL's EVP_PKEY, kept opaque here so that users of the config need no OpenSSL headers.
struct evp_pkey_st;
struct ssl_ctx_st;

namespace floodgate::tls {
class ServerContexts;
class QuicCredentials;
}  // namespace floodgate::tls

namespace floodgate::config {

using namespace std::chrono_literals;

struct TlsCertificate {
  std::string cert;
  std::string key;
};

struct TlsSettings {
  std::vector<TlsCertificate> certificates;  // chosen by SNI; the first is the default
  std::string min_version = "1.2";
  // Built from `certificates` at load time (see floodgate/tls/contexts.hpp).
  std::shared_ptr<const tls::ServerContexts> contexts;
  // The same certificates for GnuTLS, which QUIC's TLS runs on
  // (floodgate/tls/quic_credentials.hpp): built only for a listener that lists h3.
  std::shared_ptr<const tls::QuicCredentials> quic;
};

// What a listener speaks. TLS listeners offer theirs by ALPN in the listed order; a plain
// one that lists h2c tells an HTTP/2 connection preface (prior knowledge) from HTTP/1.1. h3
// (TLS listeners only) is HTTP/3 over QUIC on a UDP socket of the same address and port.
enum class Protocol { http1, h2, h2c, h3 };
const char* to_string(Protocol p);

struct Listener {
  Endpoint address;
  std::optional<TlsSettings> tls;
  std::vector<Protocol> protocols;  // never empty: default [h2, http1] with TLS, else [http1]
  bool speaks(Protocol p) const {
    return std::find(protocols.begin(), protocols.end(), p) != protocols.end();
  }
};

struct Http2Settings {
  std::uint32_t max_concurrent_streams = 128;  // per connection, announced in SETTINGS
  std::uint32_t max_resets_per_second = 100;   // RST_STREAMs from a client before GOAWAY
};

struct ClientIpSettings {
  std::string header = "X-Forwarded-For";
  std::vector<Cidr> trusted_proxies;
  int ipv6_prefix = 64;
};

struct Timeouts {
  Duration header_read = 10s;
  Duration idle = 60s;
  Duration drain = 15s;
};

struct ServerSettings {
  std::vector<Listener> listen;
  int threads = 0;  // 0 = one per core
  std::string pop = "floodgate";
  ClientIpSettings client_ip;
  Timeouts timeouts;
  std::uint64_t max_header_bytes = 16 * 1024;
  std::uint64_t max_body_bytes = 10 * 1024 * 1024;
  // Client connections open at once on this instance, all workers and listeners together
  // (HAProxy's maxconn, not nginx's per-worker worker_connections); past it new ones wait in
  // the listen queue. 0: no limit.
  std::int64_t max_connections = 10'000;
  // Requests held by `on_exceed: delay` limits at once on this instance; past it such limits
  // refuse as if they had no delay (a queue must not exhaust memory).
  std::int64_t max_delayed = 1024;
  Http2Settings http2;
};

// The heaviest callers of each limit, kept for the admin listener's /top and page.
struct TopSettings {
  bool enabled = true;  // `top: off` turns it off; without an admin listener nothing is kept
  std::size_t k = 20;   // callers shown per limit (decide::TopBoard::counters: how many kept)
  Duration window{60'000};
};

// A bearer token of the admin API; its name is who the log says made a change.
struct AdminToken {
  std::string name;
  std::string value;
};

struct AdminSettings {
  std::optional<Endpoint> listen;
  TopSettings top;
  // `token: VALUE` (named "admin") or `tokens: {NAME: VALUE}`; none: the write API is off.
  std::vector<AdminToken> tokens;
  // Whether requests feed the top offenders: only where someone can read them.
  bool keeps_top() const { return listen && top.enabled; }
};

// How floodgate speaks to an origin: HTTP/1.1 keep-alive connections, one request each at a
// time, or HTTP/2 (prior knowledge on http://, ALPN h2 on https://), many streams each.
enum class UpstreamProtocol { http1, h2 };

// One origin server of an upstream, with everything a connection to it needs (the
// upstream's shared settings are copied into each).
struct UpstreamServer {
  std::string name;  // the upstream's: metrics, logs
  std::string url;
  std::uint32_t weight = 1;
  UpstreamProtocol protocol = UpstreamProtocol::http1;
  bool tls = false;  // https
  std::string host;
  std::uint16_t port = 80;
  Duration connect_timeout = 1s;
  Duration response_timeout = 30s;
  std::size_t max_idle_connections = 256;
  std::string ca_file;
  std::shared_ptr<ssl_ctx_st> tls_context;  // https: built at load time, verifies the origin
  // Idle connections are shared by servers with the same key, across reloads too: the url,
  // plus for https how the origin was verified (another ca_file must not reuse them).
  std::string pool_key;
};

// How a request's server is chosen among those of its upstream that are up.
enum class Balance { round_robin, least_requests };

// Active checks: each server is asked `GET path` every `interval`; a 2xx or 3xx within
// `timeout` passes. `unhealthy` failures in a row take it out, `healthy` passes bring it back.
struct HealthCheck {
  std::string path = "/";
  Duration interval = 5s;
  Duration timeout = 1s;
  int healthy = 2;
  int unhealthy = 3;
};

// Passive ejection: a server whose requests failed `consecutive_failures` times in a row
// (connect failures, timeouts, 5xx) gets none for `cool_down`. 0 failures: never ejected.
struct Ejection {
  int consecutive_failures = 5;
  Duration cool_down = 30s;
};

struct Upstream {
  std::string name;
  std::vector<UpstreamServer> servers;  // at least one; `url:` is the one-server shorthand
  Balance balance = Balance::round_robin;
  std::optional<HealthCheck> health_check;
  Ejection ejection;
};

enum class JwtAlgorithm { hs256, rs256, es256, eddsa };

struct JwtSettings {
  std::string header = "Authorization";
  std::vector<JwtAlgorithm> algorithms;
  std::string hs256_secret;
  std::vector<std::string> public_keys;  // PEM file paths, as written
  // The public keys read from `public_keys` at load time (same order; RSA or EC P-256), so
  // that a snapshot is self-contained and never reads a file while serving.
  std::vector<std::shared_ptr<evp_pkey_st>> keys;
  std::optional<JwksSettings> jwks;
  std::string issuer;    // empty: not checked
  std::string audience;  // empty: not checked
  Duration leeway = 30s;
};

// quota: a fixed window whose bounds are a calendar period (Limit::period).
enum class Algorithm {
  token_bucket,
  gcra,
  sliding_window,
  sliding_log,
  fixed_window,
  concurrency,
  quota
};

// The parameters a limit (or one of its tiers) sets. Which are meaningful depends on the
// algorithm: buckets use capacity + refill_rate, windows limit + window, concurrency limit.
struct LimitParams {
  std::int64_t capacity = 0;
  Rate refill_rate;
  std::int64_t limit = 0;
  Duration window{0};
};

struct KeyPart {
  // New kinds go last: a part's kind is hashed into its store key (keys/key_builder.cpp).
  // cookie: a request cookie by name; tls: the ClientHello's fingerprint (name ja4 or ja3);
  // descriptor: an RLS descriptor's entry by position (name "0", "1", ...: set by the RLS
  // rules, never written in a config).
  enum class Kind { ip, route, method, host, path, header, query, jwt, cookie, tls, descriptor };
  Kind kind = Kind::ip;
  std::string name;  // header / query parameter / claim / cookie name; tls: ja4 or ja3
  std::string text;  // as written, for messages and summaries
};

enum class OnMissingKey { reject, skip, shared };
// What a token_bucket or gcra limit does with a request over it: refuse (429), or hold it
// until its units have refilled, for at most max_delay (nginx's limit_req burst without
// nodelay).
enum class OnExceed { reject, delay };
enum class LimitMode { enforce, shadow };

struct Cost {
  std::string from_header;  // empty: every request costs `fixed`
  std::int64_t fixed = 1;   // also the default when the header is absent or empty
  std::int64_t max = 0;     // clamp; defaults to the limit's capacity (or limit)
};

struct Overrides {
  KeyPart by;  // a jwt:CLAIM
  std::map<std::string, LimitParams> values;
};

struct LeaseSettings {
  std::int64_t size = 0;  // units per lease (the default is filled in when the file is read)
  Duration ttl{2000};     // unused units go back to the store after this
  // The published bound (docs/architecture.md, "Leased decisions"): units a caller may be
  // refused early. What the other instances hold, (instances - 1) x size, on every algorithm.
  // On all but fixed_window also what the instances had spent and not yet reported when the
  // bucket was last full, or left unspent in the window before: the store counts those until
  // the bucket next refills or that window has passed, at most instances x size more.
  std::int64_t early_refusal_bound(int instances, Algorithm a) const {
    const std::int64_t n = std::max(1, instances);
    return (lingers(a) ? 2 * n - 1 : n - 1) * size;
  }
  static bool lingers(Algorithm a) { return a != Algorithm::fixed_window; }
};

// Response statuses a limit charges for (`count: {status: [401, 403, "5xx"]}`): the status
// as written, and a bit per status from 100 to 599 for the lookup at the response's end.
struct StatusSet {
  std::vector<std::string> written;  // "401", "5xx", "400-403": for /config and the summary
  std::bitset<600> bits;
  bool contains(int status) const { return status >= 0 && status < 600 && bits.test(status); }
};

// "10%", "0.5%", "100%": a rollout share as written back (basis points to percent).
inline std::string format_rollout(int basis_points) {
  std::string out = std::to_string(basis_points / 100);
  if (int frac = basis_points % 100) {
    out += '.';
    out += static_cast<char>('0' + frac / 10);
    if (frac % 10) out += static_cast<char>('0' + frac % 10);
  }
  return out + "%";
}

struct Limit {
  std::string name;
  Algorithm algorithm = Algorithm::token_bucket;
  LimitParams params;
  std::vector<KeyPart> key;
  OnMissingKey on_missing_key = OnMissingKey::reject;
  std::optional<Overrides> overrides;
  Cost cost;
  std::string settle_header;  // response header (or trailer) carrying the true cost; empty: none
  bool settle_from_trailer = false;  // settle: response_trailer:NAME
  // Charged only when the response's status is one of these (checked before forwarding like
  // any limit; what a request took is given back after a response that does not match).
  std::optional<StatusSet> count;
  // quota: the calendar period (`period`, `timezone`, `anchor_day`); shared with every
  // decision's limit::Params, which may outlive this snapshot.
  std::shared_ptr<const calendar::Period> period;
  LimitMode mode = LimitMode::enforce;
  OnExceed on_exceed = OnExceed::reject;
  Duration max_delay{0};  // on_exceed: delay
  // `rollout: 10%`: enforced for the keys whose rollout bucket (limit::rollout_bucket, 0-9999
  // from the key's hash) is below this, shadowed for the rest. 10000: every key.
  int rollout_basis_points = 10000;
  // Decided in the instance from units leased from the store (SPEC "Leased decisions").
  std::optional<LeaseSettings> lease;
};

// One allow or deny list: client addresses (the resolved client, behind trusted proxies) and
// exact values of key parts (jwt:tenant, header:X-Api-Key, ...), from the config and from a
// file that every reload reads again.
struct AccessList {
  CidrSet cidrs;
  struct Values {
    KeyPart part;
    std::unordered_set<std::string> values;
  };
  std::vector<Values> values;  // one entry per part
  std::string file;            // as written (resolved against the config's directory)
  bool empty() const { return cidrs.empty() && values.empty(); }
  std::size_t entries() const {
    std::size_t n = cidrs.size();
    for (const auto& v : values) n += v.values.size();
    return n;
  }
};

// `deny` answers 403 before any limit; `allow` skips the limits. Deny wins where both match.
struct Lists {
  AccessList deny;
  AccessList allow;
  bool empty() const { return deny.empty() && allow.empty(); }
};

enum class OnStoreError { fail_open, fail_closed, local };

struct RouteMatch {
  std::string path_prefix;           // empty with path empty: every path
  std::string path;                  // exact path
  std::vector<std::string> methods;  // upper case; empty: every method
  std::string host;                  // lower case, without port; empty: every host
};

// An operator's own refusal answer (`refusal: {status, content_type, body | file}`) in place
// of the built-in JSON: the body as text pieces and placeholders, filled in per refusal.
struct RefusalPage {
  int status = 429;
  std::string content_type = "text/plain; charset=utf-8";
  enum class Field { text, limit, retry_after, route, request_id };
  struct Piece {
    Field field = Field::text;
    std::string text;  // Field::text only
  };
  std::vector<Piece> body;
  std::size_t body_bytes = 0;  // the text pieces' size, for /config
};

// A route path with parameters: each `{name}` stands for one whole, non-empty segment.
struct PathTemplate {
  std::string text;                           // as written: what the `path` key part yields
  std::vector<std::string> segments;          // after the leading '/'; "" for a parameter
  bool matches(std::string_view path) const;  // a normalized request path (no query)
};

struct Route {
  std::string name;
  RouteMatch match;
  std::string upstream;
  std::size_t upstream_index = 0;  // into Config::upstreams
  OnStoreError on_store_error = OnStoreError::fail_open;
  // Paths with %2F, %5C or %00 are refused (400) unless their route allows them: an origin
  // that decodes them would serve another path than the one routed and limited.
  bool allow_encoded_slashes = false;
  Lists lists;  // this route's own, checked with the global ones
  // `path_template: /users/{id}/orders`: a request path matching one of these is keyed (the
  // `path` key part) by the template, so all ids share one key; other paths by themselves.
  std::vector<PathTemplate> path_templates;
  std::vector<Limit> limits;
  // Its own refusal answer, or the config's `refusal:` for routes without; null: built in.
  std::shared_ptr<const RefusalPage> refusal;
  // An RLS domain's limits ("rls:DOMAIN"): decided for Envoy's rate limit service, never
  // matched by an HTTP request, no upstream.
  bool rls = false;
};

// Envoy's rate limit service (SPEC "Envoy's rate limit service (RLS)"): its listeners and
// domains (the domains' rules: rls.hpp).
struct RlsSettings {
  std::vector<Listener> listen;  // gRPC over h2c, or h2 with TLS
  OnStoreError on_store_error = OnStoreError::fail_open;
  std::vector<RlsDomain> domains;
  std::string envoy_config;  // a directory of envoyproxy/ratelimit files (resolved); empty: none
  const RlsDomain* domain(std::string_view name) const {
    for (const auto& d : domains)
      if (d.name == name) return &d;
    return nullptr;
  }
};

struct Config {
  std::string source;  // the file it came from (or config_source's url, redacted)
  // The top-level `version:` (required of a config fetched from config_source, where it only
  // goes up), and the SHA-256 of the document's bytes (hex): floodgate_config_info.
  std::optional<std::int64_t> version;
  std::string sha256;
  // `config_source:`: a file that names one holds nothing else; the config to serve is fetched.
  std::optional<FeedSettings> feed;
  ServerSettings server;
  AdminSettings admin;
  LogSettings log;
  std::vector<Upstream> upstreams;
  StoreSettings store;
  std::optional<JwtSettings> jwt;
  Lists lists;                // global: every route's requests
  std::vector<Route> routes;  // the HTTP routes, then the RLS domains' (Route::rls)
  RlsSettings rls;
  // Some limit, list or log.replay_fields reads tls:ja4 or tls:ja3: TLS listeners take the
  // ClientHello's fingerprints (set at load).
  bool tls_fingerprints = false;

  const Upstream& upstream_of(const Route& r) const { return upstreams[r.upstream_index]; }
};

using ConfigPtr = std::shared_ptr<const Config>;

// The request inputs a config's lists and limits read (list CIDRs read ip; limits read
// through their keys and tier selectors), once each, in config order (ip, host, header:, query:,
// jwt:; route, method and path are left out): what `log.replay_fields: auto` records and what a
// replay reports as missing from a log.
std::vector<ReplayField> limit_inputs(const Config& c);

const char* to_string(Algorithm a);
const char* to_string(StoreBackend b);
const char* to_string(OnStoreError e);
const char* to_string(LogLevel l);

}  // namespace floodgate::config
