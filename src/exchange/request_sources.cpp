#include "request_sources.hpp"

namespace floodgate::http {

std::optional<std::string_view> FieldHeaders::header(std::string_view name) const {
  return f_.find(name);
}

std::optional<std::string_view> FieldHeaders::cookie(std::string_view name) const {
  // The first pair named `name` in the joined text is the first found header by header:
  // "; " ends the last pair of one header, so no pair spans two. Nothing is copied.
  for (const auto& field : f_)
    if (Fields::named(field, "cookie"))
      if (auto v = keys::cookie_value(field.value, name)) return v;
  return std::nullopt;
}

std::optional<std::string> LazyClaims::claim(std::string_view name) const {
  if (!c_.jwt) return std::nullopt;
  if (!result_) {
    const std::string_view value = f_.get(c_.jwt->header);
    // A token may be checked against the JWKS only while the config still names one.
    const auto set = jwks_ && c_.jwt->jwks ? jwks_->get() : nullptr;
    result_ = keys::verify_jwt(value, *c_.jwt, now_seconds_, set.get());
    if (result_->error == keys::JwtError::unknown_key) jwks_->ask_refresh();
  }
  if (!result_->ok()) return std::nullopt;
  return keys::claim_text(result_->claims, name);
}

}  // namespace floodgate::http
