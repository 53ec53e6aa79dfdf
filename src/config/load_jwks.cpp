// `jwt.jwks: {url, refresh, ca_file}`: where the issuer publishes its keys. Only the settings
// are read here (and the client context built, so a bad ca_file is an error at load); the
// keys themselves are fetched by the app's JwksRefresher, in the background. The url is shown
// only through redacted_url: its query may hold the issuer's API key.
#include <boost/url/parse.hpp>

#include "floodgate/config/redact.hpp"
#include "floodgate/tls/contexts.hpp"
#include "sections.hpp"

namespace floodgate::config {

std::optional<JwksSettings> read_jwks(const Section& s) {
  auto& r = s.reader();
  if (!r.map(s.node(), s.path(), {"url", "refresh", "ca_file"}) || !s.require("url"))
    return std::nullopt;
  JwksSettings out;
  s.string("url", out.url);
  auto parsed = boost::urls::parse_uri(out.url);
  if (parsed && parsed->has_userinfo()) {
    // Never sent as HTTP authentication, only shown; and not echoed here either.
    r.error(s["url"], s.at("url"),
            "credentials in a jwks url are not supported: remove the \"USER:PASSWORD@\" part (a "
            "key in the query, ?api_key=..., is sent, and shown redacted)");
    return std::nullopt;
  }
  if (!parsed || parsed->scheme() != "https" || !parsed->has_authority() ||
      parsed->host().empty()) {
    r.error(s["url"], s.at("url"),
            "expected https://HOST[:PORT]/PATH (keys are fetched over verified TLS), got \"" +
                redacted_url(out.url) + "\"");
    return std::nullopt;
  }
  out.host = parsed->host_address();
  out.port = parsed->has_port() ? std::string(parsed->port()) : "443";
  out.target = parsed->encoded_path().empty() ? "/" : std::string(parsed->encoded_path());
  if (parsed->has_query()) out.target += "?" + std::string(parsed->encoded_query());
  s.duration("refresh", out.refresh, Duration(10'000));
  s.string("ca_file", out.ca_file);
  if (!out.ca_file.empty()) out.ca_file = r.resolve_path(out.ca_file);
  auto ctx = tls::make_client_context(out.ca_file);
  if (auto* why = std::get_if<std::string>(&ctx)) {
    r.error(s.has("ca_file") ? s["ca_file"] : s.node(), s.at("ca_file"), *why);
    return std::nullopt;
  }
  out.client = std::get<std::shared_ptr<ssl_ctx_st>>(std::move(ctx));
  return out;
}

}  // namespace floodgate::config
