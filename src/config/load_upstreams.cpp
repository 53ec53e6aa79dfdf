// The upstreams section: servers, protocols, timeouts, balancing, ejection, health checks.
#include <boost/url/parse.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <variant>

#include "floodgate/tls/contexts.hpp"
#include "sections.hpp"

namespace floodgate::config {
namespace {

// `url` with everything before its last '@' (after the scheme) shown as "***": a url that
// fails to parse is echoed in the error, and a password must not be, even one holding a '/',
// '?' or '#' that would end the authority of a well-formed url (hiding too much is harmless).
std::string without_userinfo(std::string url) {
  auto scheme_end = url.find("://");
  auto start = scheme_end == std::string::npos ? 0 : scheme_end + 3;
  auto at = url.rfind('@');
  if (at != std::string::npos && at >= start) url.replace(start, at - start, "***");
  return url;
}

// One server's url into `u` (scheme, host, port); errors at `at`.
void read_server_url(YamlReader& r, const YAML::Node& at, const std::string& path,
                     UpstreamServer& u) {
  auto parsed = boost::urls::parse_uri(u.url);
  const std::string why =
      "expected http://HOST[:PORT] or https://HOST[:PORT], got \"" + without_userinfo(u.url) + "\"";
  if (!parsed || !parsed->has_authority() || parsed->host().empty()) {
    r.error(at, path, why);
  } else if (parsed->scheme() != "http" && parsed->scheme() != "https") {
    r.error(at, path, why);
  } else if (parsed->has_userinfo()) {
    // As with nginx's proxy_pass: they would never be sent, only shown (in /config,
    // --check-config and every upstream log line). Not echoed here either.
    r.error(at, path,
            "credentials in an upstream url are not supported (they would be shown, never "
            "sent): remove the \"USER:PASSWORD@\" part; an origin that needs credentials "
            "gets the clients' Authorization header, which is forwarded unchanged");
  } else if (!parsed->encoded_path().empty() && parsed->encoded_path() != "/") {
    r.error(at, path, "a path in an upstream url is not supported (requests keep their own path)");
  } else {
    u.tls = parsed->scheme() == "https";
    u.host = parsed->host_address();
    u.port = parsed->has_port() ? parsed->port_number() : (u.tls ? 443 : 80);
    if (parsed->has_port() && u.port == 0) r.error(at, path, "port must be from 1 to 65535");
  }
}

void read_health_check(const Section& s, HealthCheck& hc) {
  auto& r = s.reader();
  if (!r.map(s.node(), s.path(), {"path", "interval", "timeout", "healthy", "unhealthy"})) return;
  s.string("path", hc.path);
  if (hc.path.empty() || hc.path.front() != '/' ||
      hc.path.find_first_of(" \r\n\t") != std::string::npos)
    r.error(s["path"], s.at("path"), "expected an origin-form path such as /healthz");
  s.duration("interval", hc.interval);
  s.duration("timeout", hc.timeout);
  s.integer("healthy", hc.healthy, 1, 100);
  s.integer("unhealthy", hc.unhealthy, 1, 100);
  if (hc.timeout > hc.interval)
    r.error(s.has("timeout") ? s["timeout"] : s.node(), s.at("timeout"),
            "must not be longer than the interval (" + format_duration(hc.interval) + ")");
}

}  // namespace

void read_upstreams(const Section& s, std::vector<Upstream>& out) {
  auto& r = s.reader();
  if (!s.node().IsMap()) {
    r.error(s.node(), s.path(), "expected a map of upstream names to their settings");
    return;
  }
  for (auto it = s.node().begin(); it != s.node().end(); ++it) {
    Upstream up;
    up.name = it->first.Scalar();
    std::string path = s.at(up.name.c_str());
    if (!valid_name(up.name))
      r.error_at(it->first.Mark(), path + ": upstream names are letters, digits, '-', '_' or '.'");
    if (std::any_of(out.begin(), out.end(), [&](const Upstream& o) { return o.name == up.name; }))
      r.error_at(it->first.Mark(), "duplicate upstream \"" + up.name + "\"");
    Section us(r, it->second, path);
    if (!r.map(us.node(), path,
               {"url", "servers", "balance", "health_check", "ejection", "protocol",
                "connect_timeout", "response_timeout", "max_idle_connections", "ca_file"}))
      continue;
    // The settings every server shares.
    UpstreamServer shared;
    shared.name = up.name;
    us.choice<UpstreamProtocol>("protocol", shared.protocol,
                                {{"http1", UpstreamProtocol::http1}, {"h2", UpstreamProtocol::h2}});
    us.duration("connect_timeout", shared.connect_timeout);
    us.duration("response_timeout", shared.response_timeout);
    us.integer("max_idle_connections", shared.max_idle_connections, 0, 100000);
    us.string("ca_file", shared.ca_file);
    shared.ca_file = r.resolve_path(shared.ca_file);
    us.choice<Balance>(
        "balance", up.balance,
        {{"round_robin", Balance::round_robin}, {"least_requests", Balance::least_requests}});
    if (us.has("health_check"))
      read_health_check(Section(r, us["health_check"], us.at("health_check")),
                        up.health_check.emplace());
    if (us.has("ejection")) {
      Section ej(r, us["ejection"], us.at("ejection"));
      if (r.map(ej.node(), ej.path(), {"consecutive_failures", "cool_down"})) {
        ej.integer("consecutive_failures", up.ejection.consecutive_failures, 0, 1000);
        ej.duration("cool_down", up.ejection.cool_down);
      }
    }

    // Each server: where it is (and its weight); the first error about one is at its url.
    struct Given {
      YAML::Node at;
      std::string path;
    };
    std::vector<Given> given;
    if (us.has("url") == us.has("servers")) {
      r.error(us.node(), path, "give either \"url\" (one server) or \"servers\" (a list)");
    } else if (us.has("url")) {
      auto& u = up.servers.emplace_back(shared);
      us.string("url", u.url);
      given.push_back({us["url"], us.at("url")});
    } else {
      auto list = r.sequence(us["servers"], us.at("servers"));
      if (list.empty() && us["servers"].IsSequence())
        r.error(us["servers"], us.at("servers"), "at least one server is needed");
      for (std::size_t i = 0; i < list.size(); ++i) {
        Section ss(r, list[i], us.at("servers") + "[" + std::to_string(i) + "]");
        if (!r.map(ss.node(), ss.path(), {"url", "weight"}) || !ss.require("url")) continue;
        auto& u = up.servers.emplace_back(shared);
        ss.string("url", u.url);
        ss.integer("weight", u.weight, 1, 1000);
        given.push_back({ss["url"], ss.at("url")});
      }
    }
    for (std::size_t i = 0; i < up.servers.size(); ++i) {
      auto& u = up.servers[i];
      read_server_url(r, given[i].at, given[i].path, u);
      for (std::size_t j = 0; j < i; ++j)
        if (up.servers[j].url == u.url)
          r.error(given[i].at, given[i].path, "\"" + u.url + "\" is listed twice");
      if (!u.ca_file.empty() && !u.tls &&
          std::none_of(up.servers.begin(), up.servers.begin() + i,
                       [](const auto& o) { return !o.tls; }))
        r.error(us["ca_file"], us.at("ca_file"), "ca_file only applies to an https upstream");
      if (u.tls) {
        auto ctx = tls::make_client_context(u.ca_file);
        if (auto* why = std::get_if<std::string>(&ctx))
          r.error(u.ca_file.empty() ? given[i].at : us["ca_file"],
                  u.ca_file.empty() ? given[i].path : us.at("ca_file"), *why);
        else
          u.tls_context = std::get<std::shared_ptr<ssl_ctx_st>>(std::move(ctx));
      }
      u.pool_key = u.tls ? u.url + " ca_file=" + u.ca_file : u.url;
      if (u.protocol == UpstreamProtocol::h2) u.pool_key += " h2";
    }
    out.push_back(std::move(up));
  }
}
}  // namespace floodgate::config
