#pragma once
// A parsed request as the key builder sees it: headers by name, and JWT claims verified
// lazily. Shared by the limit gate, the fuzz target and the micro-benchmarks.

#include <optional>
#include <string>
#include <string_view>

#include "fields.hpp"
#include "floodgate/config/config.hpp"
#include "floodgate/keys/jwks.hpp"
#include "floodgate/keys/jwt.hpp"
#include "floodgate/keys/key_builder.hpp"

namespace floodgate::http {

class FieldHeaders final : public keys::HeaderSource {
 public:
  explicit FieldHeaders(const Fields& f) : f_(f) {}
  std::optional<std::string_view> header(std::string_view name) const override;
  // Every Cookie field, in the order received, as if joined with "; " (as HTTP/2's crumbs
  // are): an HTTP/1.1 client may send several, and the origin receives them all.
  std::optional<std::string_view> cookie(std::string_view name) const override;

 private:
  const Fields& f_;
};

// Verifies the token once, on the first claim asked for; a request whose limits use no
// claim never pays for signature checks.
class LazyClaims final : public keys::ClaimSource {
 public:
  LazyClaims(const Fields& f, const config::Config& c, std::int64_t now_seconds,
             keys::JwksCell* jwks = nullptr)
      : f_(f), c_(c), now_seconds_(now_seconds), jwks_(jwks) {}
  std::optional<std::string> claim(std::string_view name) const override;
  // Why the token failed, once a claim was asked for (none: not asked, or it verified).
  keys::JwtError error() const { return result_ ? result_->error : keys::JwtError::none; }

 private:
  const Fields& f_;
  const config::Config& c_;
  std::int64_t now_seconds_;
  keys::JwksCell* jwks_;
  mutable std::optional<keys::JwtResult> result_;
};

}  // namespace floodgate::http
