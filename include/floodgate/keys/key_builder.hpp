#pragma once
// Store keys: pure functions of (route, limit, request). Every component is length-prefixed
// before hashing, so no two different callers can produce the same key, and the caller's
// identity is stored only as a keyed hash. The hashed part is the key's Redis Cluster hash
// tag, so all of one request's keys for one limit land in one slot.

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "floodgate/config/config.hpp"
#include "floodgate/tls/fingerprint.hpp"

namespace floodgate::keys {

// Looks up request headers (case-insensitive); the session adapts its message to this.
class HeaderSource {
 public:
  virtual ~HeaderSource() = default;
  virtual std::optional<std::string_view> header(std::string_view name) const = 0;
  // A request cookie by name (case-sensitive): from the Cookie header by default (HTTP/2's
  // cookie crumbs arrive joined into one, RFC 9113 8.2.3).
  virtual std::optional<std::string_view> cookie(std::string_view name) const;
};

// The value of cookie `name` in a Cookie header ("a=1; sid=xyz"): the first pair with that
// name, its value without surrounding quotes; nullopt when there is none.
std::optional<std::string_view> cookie_value(std::string_view header, std::string_view name);

// Verified JWT claims, looked up (and verified) only when a limit needs one.
class ClaimSource {
 public:
  virtual ~ClaimSource() = default;
  virtual std::optional<std::string> claim(std::string_view name) const = 0;
};

struct RequestFacts {
  std::string_view route;
  std::string_view method;
  std::string_view host;  // without port, as received
  std::string_view path;
  std::string_view query;  // raw, without '?'
  config::IpAddress client;
  const HeaderSource* headers = nullptr;
  const ClaimSource* claims = nullptr;
  const tls::Fingerprints* tls = nullptr;  // TLS connections whose limits key on them
  // The route's path_template this path matched (keyed instead of the path), or empty.
  std::string_view path_template;
  // server.client_ip.ipv6_prefix: the bits of an IPv6 `client` an `ip` key part keeps. Lists
  // read `client` whole; 128 (the default) keys an address as it is given.
  int ipv6_prefix = 128;
  // An RLS descriptor's entries as `descriptor` key parts read them, by position.
  std::span<const std::string_view> descriptor;
};

// The template of `route` that `path` matches, or empty (the path is keyed as it is).
std::string_view matching_template(const config::Route& route, std::string_view path);

// HMAC-SHA256 under the store's key_secret, truncated to 128 bits, as 32 hex digits. Holds an
// initialised OpenSSL MAC context and a bounded memo of recent digests: one per worker (not
// thread-safe), no allocation per call once warm.
class KeyHasher {
 public:
  // `offline`: a fast non-cryptographic 128-bit hash instead of the HMAC, for `floodgate
  // replay`, whose keys live in a throwaway in-process store and only need to be distinct.
  enum class Kind { hmac, offline };
  explicit KeyHasher(std::string_view secret, Kind kind = Kind::hmac);
  ~KeyHasher();
  KeyHasher(const KeyHasher&) = delete;
  KeyHasher& operator=(const KeyHasher&) = delete;
  std::string hex(std::string_view material);
  // The same 32 hex digits, appended to `out` (no allocation of their own).
  void append_hex(std::string& out, std::string_view material);
  const std::string& secret() const { return secret_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string secret_;
  Kind kind_;
};

// The value of one key part for this request, or nullopt when the request lacks it.
std::optional<std::string> part_value(const config::KeyPart& part, const RequestFacts& request);

// The caller a limit's key stands for, for people to read (/top, replay reports): its parts'
// values as `ip=203.0.113.7 jwt:tenant=acme`, without the parts every caller of the limit
// shares (route, method); "(everyone)" when nothing is left. Bytes other than printable ASCII,
// and the backslash, are written \xHH (so the text reads back to one caller only: caller_key)
// and the text is cut at 256 bytes: values come from clients.
void append_caller_text(std::string& out, const config::Limit& limit, const RequestFacts& request);

// A query parameter's raw value (first occurrence), or nullopt.
std::optional<std::string_view> query_param(std::string_view query, std::string_view name);

struct BuiltKey {
  std::string key;       // empty when `missing`
  bool missing = false;  // some part is absent: the limit's on_missing_key decides
};

// "<prefix>:<route>:<limit>:{<hash>}". With `on_missing_key: shared`, a request missing a part
// gets the one shared bucket "<prefix>:<route>:<limit>:{shared}".
BuiltKey build_key(std::string_view prefix, const config::Route& route, const config::Limit& limit,
                   const RequestFacts& request, KeyHasher& hasher);
// The same into `key`, whose capacity is reused (a replay builds millions); returns `missing`.
bool build_key_into(std::string& key, std::string_view prefix, const config::Route& route,
                    const config::Limit& limit, const RequestFacts& request, KeyHasher& hasher);

}  // namespace floodgate::keys
