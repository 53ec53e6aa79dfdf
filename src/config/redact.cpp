#include "floodgate/config/redact.hpp"

#include <boost/url/parse.hpp>

namespace floodgate::config {

namespace {

constexpr std::string_view kHidden = "***";

// The fallback for text that is not a url: a password may hold '/', '?' or '#', which would
// end a well-formed authority, so the userinfo goes first, up to the last '@'.
std::string redacted_text(std::string_view url) {
  const auto scheme_end = url.find("://");
  const auto start = scheme_end == std::string_view::npos ? 0 : scheme_end + 3;
  std::string out(url.substr(0, start));
  auto rest = url.substr(start);
  if (const auto at = rest.rfind('@'); at != std::string_view::npos) {
    out.append(kHidden).append("@");
    rest.remove_prefix(at + 1);
  }
  const auto query = rest.find_first_of("?#");
  out.append(rest.substr(0, query));
  if (query != std::string_view::npos) out.append(1, rest[query]).append(kHidden);
  return out;
}

}  // namespace

std::string redacted_url(std::string_view url) {
  auto parsed = boost::urls::parse_uri(url);
  if (!parsed) return redacted_text(url);
  const auto& u = *parsed;
  std::string out(u.scheme());
  out += ":";
  if (u.has_authority()) {
    out += "//";
    if (u.has_userinfo()) out.append(kHidden).append("@");
    out += u.encoded_host_and_port();
  }
  out += u.encoded_path();
  if (u.has_query()) {
    out += "?";
    bool first = true;
    for (auto p : u.encoded_params()) {
      if (!first) out += "&";
      first = false;
      // Names stay (they tell which parameter it was); a bare `?SECRET` is hidden whole.
      if (p.has_value)
        out.append(p.key.data(), p.key.size()).append("=").append(kHidden);
      else
        out.append(kHidden);
    }
  }
  if (u.has_fragment()) out.append("#").append(kHidden);
  return out;
}

}  // namespace floodgate::config
