// An https:// url and its `ca_file`, read for anything floodgate fetches (jwt.jwks,
// config_source): split for the fetch, with the client context that verifies the server built
// here so that a bad ca_file is an error at load. The url is shown only through redacted_url:
// its query may hold an API key.
#include <boost/url/parse.hpp>

#include "floodgate/config/redact.hpp"
#include "floodgate/tls/contexts.hpp"
#include "sections.hpp"

namespace floodgate::config {

bool read_https_url(const Section& s, HttpsUrl& out, std::string_view what) {
  auto& r = s.reader();
  s.string("url", out.url);
  auto parsed = boost::urls::parse_uri(out.url);
  if (parsed && parsed->has_userinfo()) {
    // Never sent as HTTP authentication, only shown; and not echoed here either.
    r.error(s["url"], s.at("url"),
            "credentials in a url floodgate fetches are not supported: remove the "
            "\"USER:PASSWORD@\" part (a key in the query, ?api_key=..., is sent, and shown "
            "redacted)");
    return false;
  }
  if (!parsed || parsed->scheme() != "https" || !parsed->has_authority() ||
      parsed->host().empty()) {
    r.error(s["url"], s.at("url"),
            "expected https://HOST[:PORT]/PATH (" + std::string(what) +
                " fetched over verified TLS), got \"" + redacted_url(out.url) + "\"");
    return false;
  }
  out.host = parsed->host_address();
  out.port = parsed->has_port() ? std::string(parsed->port()) : "443";
  out.target = parsed->encoded_path().empty() ? "/" : std::string(parsed->encoded_path());
  if (parsed->has_query()) out.target += "?" + std::string(parsed->encoded_query());
  s.string("ca_file", out.ca_file);
  if (!out.ca_file.empty()) out.ca_file = r.resolve_path(out.ca_file);
  auto ctx = tls::make_client_context(out.ca_file);
  if (auto* why = std::get_if<std::string>(&ctx)) {
    r.error(s.has("ca_file") ? s["ca_file"] : s.node(), s.at("ca_file"), *why);
    return false;
  }
  out.client = std::get<std::shared_ptr<ssl_ctx_st>>(std::move(ctx));
  return true;
}

}  // namespace floodgate::config
