#pragma once
// Verified JWT claims for `jwt:CLAIM` key parts (JWS compact serialization, RFC 7515/7519).
//
// Only HS256, RS256, ES256 and EdDSA exist, and only those listed in `jwt.algorithms` are
// accepted ("none" never). Each algorithm uses only its own kind of key: HS256 the shared
// secret, RS256 the RSA public keys, ES256 the EC P-256 public keys, EdDSA the Ed25519/Ed448
// ones (from public_keys, or the JWKS by kid), so a token cannot pick how it is checked (no
// algorithm confusion). Claims are returned only for a token that passed every check.

#include <boost/json/object.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "floodgate/config/config.hpp"

namespace floodgate::keys {

struct KeySet;

enum class JwtError {
  none,
  missing,                // no header value, or one without a bearer token
  malformed,              // not three base64url segments of a JSON object header and payload,
                          // bad "typ"/"crit", non-numeric exp/nbf, or longer than 8 KiB
  algorithm_not_allowed,  // "alg" not in jwt.algorithms (so always for "none")
  bad_signature,          // no configured key of the algorithm's kind verifies it
  unknown_key,            // it names a kid the JWKS does not have, and no other key verifies it
  expired,                // now > exp + leeway
  not_yet_valid,          // now + leeway < nbf
  wrong_issuer,           // jwt.issuer set and "iss" differs or is absent
  wrong_audience,         // jwt.audience set and "aud" neither equals nor contains it
};

// "none", "missing", "malformed", "algorithm_not_allowed", ... (the enumerator's name).
const char* to_string(JwtError e);

struct JwtResult {
  JwtError error = JwtError::none;
  boost::json::object claims;  // the payload; empty unless ok()
  bool ok() const { return error == JwtError::none; }
};

// Longest token accepted (after the "Bearer " scheme); longer ones are malformed.
inline constexpr std::size_t max_jwt_length = 8 * 1024;

// header_value: the configured header's value, "Bearer <token>" (scheme case-insensitive; a
// bare token is also accepted; another scheme such as "Basic ..." counts as missing).
// now_seconds: Unix time. `jwks`: the issuer's current key set (jwt.jwks), if any. Never throws.
JwtResult verify_jwt(std::string_view header_value, const config::JwtSettings& settings,
                     std::int64_t now_seconds, const KeySet* jwks = nullptr);

// RFC 4648 section 5 without padding, strictly: '=', characters outside the alphabet, an
// impossible length and non-zero unused bits are refused (one encoding per byte string).
std::optional<std::vector<unsigned char>> base64url_decode(std::string_view in);

// A claim as key material: strings as-is, integers and booleans formatted ("42", "true"),
// other types (numbers with a fraction, objects, arrays, null) or absent -> nullopt.
std::optional<std::string> claim_text(const boost::json::object& claims, std::string_view name);

}  // namespace floodgate::keys
