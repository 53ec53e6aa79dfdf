#pragma once
// JSON Web Key Sets (RFC 7517) for `jwt.jwks`: the issuer's public keys, chosen by a token's
// `kid`. Parsing is pure (keys/jwks.cpp); fetching is the app's (app/jwks_refresher.cpp),
// which publishes each good set into a JwksCell that every worker reads without a lock.

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

struct evp_pkey_st;

namespace floodgate::keys {

struct Jwk {
  std::string kid;  // may be empty: the key is then tried for tokens without a kid only
  std::shared_ptr<evp_pkey_st> key;  // RSA (2048 bits or more), EC P-256, Ed25519 or Ed448
};

// At most this many of a set's signature keys are read: identity providers publish a handful,
// and each costs CPU to check (an RSA key about 3 ms), so a set of thousands would stall every
// fetch; a token without a kid is checked with at most max_kidless_tries of them.
inline constexpr std::size_t max_jwks_keys = 64;
// The keys of its algorithm's kind a token without a `kid` is checked with, the first in the
// set: each failed check of a forged token costs a verification.
inline constexpr std::size_t max_kidless_tries = 4;

struct KeySet {
  std::vector<Jwk> keys;
  std::size_t skipped = 0;  // entries not usable for signatures here (enc, other types)
  std::size_t dropped = 0;  // signature key entries past max_jwks_keys, not even parsed
};

// `{"keys": [...]}`: the signature keys it can use (kty RSA with n and e; EC P-256 with x and
// y; OKP Ed25519/Ed448 with x; no "use" other than "sig"), of the first max_jwks_keys entries
// of those types (usable or not: each is parsed); later ones are counted in `dropped`. An
// error when it is not such a document, or has no usable key: a set that would refuse every
// token is not published.
std::variant<KeySet, std::string> parse_jwks(std::string_view json);

// The current set, swapped whole by the refresher; read per verification. Behind a mutex,
// not std::atomic<std::shared_ptr>: GCC 12's load releases its lock bit relaxed (see
// config/config_source.hpp), and a verification costs far more than the lock.
class JwksCell {
 public:
  std::shared_ptr<const KeySet> get() const {
    std::lock_guard lock(mutex_);
    return keys_;
  }
  void set(std::shared_ptr<const KeySet> keys) {
    std::lock_guard lock(mutex_);
    keys_ = std::move(keys);
  }
  // A token named a kid the set does not have: the issuer may have rotated its keys. The
  // refresher fetches again soon (at most once per its minimum interval).
  void ask_refresh() { asked_.store(true, std::memory_order_relaxed); }
  bool take_refresh_request() { return asked_.exchange(false, std::memory_order_relaxed); }

 private:
  mutable std::mutex mutex_;
  std::shared_ptr<const KeySet> keys_;
  std::atomic<bool> asked_{false};
};

}  // namespace floodgate::keys
