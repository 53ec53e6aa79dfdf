#pragma once
// Urls as they may be shown (in /config, the log, a config error): an issuer's JWKS url may
// carry a credential in its query (`?api_key=...`), which is sent but never shown.

#include <string>
#include <string_view>

namespace floodgate::config {

// `url` with any userinfo as `***`, every query parameter's value as `***` (a parameter
// without a value, which may itself be the secret, as `***` whole) and any fragment as `***`:
// `https://idp.example/jwks?api_key=***&v=***`. Text that does not parse as a url is cut at
// its first '?' or '#' and hidden up to its last '@': hiding too much is harmless.
std::string redacted_url(std::string_view url);

}  // namespace floodgate::config
