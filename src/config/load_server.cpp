// server, admin, log, upstreams, store and jwt sections.
#include <openssl/bio.h>
#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/obj_mac.h>
#include <openssl/objects.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
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

// A PEM public key ("BEGIN PUBLIC KEY") or certificate, RSA (>= 2048 bits) or EC P-256.
std::variant<std::shared_ptr<evp_pkey_st>, std::string> read_public_key(const std::string& file) {
  constexpr std::size_t max_bytes = 1 << 20;
  std::string pem;
  {
    std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(file.c_str(), "rb"), &std::fclose);
    if (!f) return std::string(std::strerror(errno));
    char buf[4096];
    std::size_t n = 0;
    while ((n = std::fread(buf, 1, sizeof buf, f.get())) > 0) {
      pem.append(buf, n);
      if (pem.size() > max_bytes) return std::string("file larger than 1MiB");
    }
    if (std::ferror(f.get())) return std::string(std::strerror(errno));
  }
  ERR_clear_error();
  auto from_pem = [&]() -> EVP_PKEY* {
    std::unique_ptr<BIO, int (*)(BIO*)> bio(
        BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())), &BIO_free);
    if (!bio) return nullptr;
    if (EVP_PKEY* k = PEM_read_bio_PUBKEY(bio.get(), nullptr, nullptr, nullptr)) return k;
    return nullptr;
  };
  auto from_cert = [&]() -> EVP_PKEY* {
    std::unique_ptr<BIO, int (*)(BIO*)> bio(
        BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())), &BIO_free);
    if (!bio) return nullptr;
    std::unique_ptr<X509, void (*)(X509*)> cert(
        PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr), &X509_free);
    return cert ? X509_get_pubkey(cert.get()) : nullptr;
  };
  std::string why;
  EVP_PKEY* raw = nullptr;
  if (pem.find("-----BEGIN CERTIFICATE-----") != std::string::npos) {
    raw = from_cert();
    if (!raw) why = "invalid certificate (" + tls::openssl_error_text("unreadable") + ")";
  } else if (pem.find("-----BEGIN PUBLIC KEY-----") != std::string::npos) {
    raw = from_pem();
    if (!raw) why = "invalid public key (" + tls::openssl_error_text("unreadable") + ")";
  } else if (pem.find("PRIVATE KEY-----") != std::string::npos) {
    why = "this is a private key; give the public key (openssl pkey -in KEY -pubout)";
  } else if (pem.find("-----BEGIN RSA PUBLIC KEY-----") != std::string::npos) {
    why =
        "PKCS#1 \"RSA PUBLIC KEY\" is not supported; convert it to \"PUBLIC KEY\" "
        "(openssl rsa -RSAPublicKey_in -in FILE -pubout)";
  } else {
    why = "no \"PUBLIC KEY\" or \"CERTIFICATE\" PEM block found";
  }
  ERR_clear_error();
  if (!raw) return why;
  std::shared_ptr<evp_pkey_st> key(raw, &EVP_PKEY_free);
  if (EVP_PKEY_is_a(raw, "RSA")) {
    int bits = EVP_PKEY_get_bits(raw);
    if (bits < 2048)
      return "RSA key of " + std::to_string(bits) +
             " bits is too short (RS256 needs at least 2048)";
    return key;
  }
  if (EVP_PKEY_is_a(raw, "EC")) {
    char group[80] = {0};
    std::size_t len = 0;
    if (EVP_PKEY_get_utf8_string_param(raw, OSSL_PKEY_PARAM_GROUP_NAME, group, sizeof group,
                                       &len) != 1) {
      ERR_clear_error();
      return std::string("EC key with an unknown curve (ES256 needs P-256)");
    }
    int nid = OBJ_sn2nid(group);
    if (nid == NID_undef) nid = EC_curve_nist2nid(group);
    if (nid != NID_X9_62_prime256v1)
      return "EC key on curve " + std::string(group) + " (ES256 needs P-256)";
    return key;
  }
  const char* type = EVP_PKEY_get0_type_name(raw);
  return std::string("unsupported key type ") + (type ? type : "?") + " (expected RSA or EC P-256)";
}

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

}  // namespace

bool valid_name(std::string_view name) {
  return !name.empty() && name.size() <= 64 && std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
  });
}

void read_server(const Section& s, ServerSettings& out) {
  auto& r = s.reader();
  if (!r.map(s.node(), s.path(),
             {"listen", "threads", "pop", "client_ip", "timeouts", "max_header_bytes",
              "max_body_bytes", "max_connections", "max_delayed", "http2"}))
    return;
  if (s.require("listen")) {
    const auto& n = s["listen"];
    auto items = n.IsSequence() ? r.sequence(n, s.at("listen")) : std::vector<YAML::Node>{n};
    for (std::size_t i = 0; i < items.size(); ++i)
      if (auto l = read_listener(r, items[i], s.at("listen") + "[" + std::to_string(i) + "]"))
        out.listen.push_back(*l);
    if (items.empty()) r.error(n, s.at("listen"), "at least one address is required");
  }
  s.integer("threads", out.threads, 0, 256);
  s.string("pop", out.pop);
  if (s.has("pop") && !valid_name(out.pop))
    r.error(s["pop"], s.at("pop"), "must be letters, digits, '-', '_' or '.' (it goes into Via)");
  if (s.has("client_ip")) {
    Section c(r, s["client_ip"], s.at("client_ip"));
    if (r.map(c.node(), c.path(), {"header", "trusted_proxies", "ipv6_prefix"})) {
      c.string("header", out.client_ip.header);
      c.integer("ipv6_prefix", out.client_ip.ipv6_prefix, 1, 128);
      if (c.has("trusted_proxies")) {
        for (const auto& e : r.sequence(c["trusted_proxies"], c.at("trusted_proxies")))
          if (auto cidr = r.parsed<Cidr>(e, c.at("trusted_proxies"), parse_cidr))
            out.client_ip.trusted_proxies.push_back(*cidr);
      }
    }
  }
  if (s.has("timeouts")) {
    Section t(r, s["timeouts"], s.at("timeouts"));
    if (r.map(t.node(), t.path(), {"header_read", "idle", "drain"})) {
      t.duration("header_read", out.timeouts.header_read);
      t.duration("idle", out.timeouts.idle);
      t.duration("drain", out.timeouts.drain, Duration(0));
    }
  }
  s.size("max_header_bytes", out.max_header_bytes);
  if (s.has("max_header_bytes") &&
      (out.max_header_bytes < 1024 || out.max_header_bytes > (1u << 24)))
    r.error(s["max_header_bytes"], s.at("max_header_bytes"), "must be between 1KiB and 16MiB");
  s.size("max_body_bytes", out.max_body_bytes);
  s.integer("max_connections", out.max_connections, 0, 10'000'000);
  s.integer("max_delayed", out.max_delayed, 0, 10'000'000);
  if (s.has("http2")) {
    Section h(r, s["http2"], s.at("http2"));
    if (r.map(h.node(), h.path(), {"max_concurrent_streams", "max_resets_per_second"})) {
      std::int64_t streams = out.http2.max_concurrent_streams;
      std::int64_t resets = out.http2.max_resets_per_second;
      h.integer("max_concurrent_streams", streams, 1, 10'000);
      h.integer("max_resets_per_second", resets, 1, 1'000'000);
      out.http2.max_concurrent_streams = static_cast<std::uint32_t>(streams);
      out.http2.max_resets_per_second = static_cast<std::uint32_t>(resets);
    }
  }
}

namespace {

// A token guessable by brute force over the network would open the write API to anyone.
constexpr std::size_t kShortestToken = 16;

void add_token(const Section& s, const YAML::Node& at, const std::string& path, std::string name,
               std::string value, AdminSettings& out) {
  auto& r = s.reader();
  if (value.size() < kShortestToken) {
    r.error(at, path,
            "is " + std::to_string(value.size()) + " characters; an admin token needs at least " +
                std::to_string(kShortestToken) + " (openssl rand -hex 32 makes one)");
    return;
  }
  for (const auto& t : out.tokens)
    if (t.value == value) r.error(at, path, "is the same as token \"" + t.name + "\"");
  out.tokens.push_back({std::move(name), std::move(value)});
}

void read_admin_tokens(const Section& s, AdminSettings& out) {
  auto& r = s.reader();
  if (s.has("token") && s.has("tokens"))
    r.error(s.node(), s.path(), "set either token or tokens, not both");
  if (s.has("token"))
    if (auto v = r.string(s["token"], s.at("token")))
      add_token(s, s["token"], s.at("token"), "admin", *v, out);
  if (!s.has("tokens")) return;
  const auto& tokens = s["tokens"];
  if (!tokens.IsMap()) {
    r.error(tokens, s.at("tokens"),
            "expected a map of names to tokens: { oncall: ${ONCALL_TOKEN} }");
    return;
  }
  for (const auto& kv : tokens) {
    const auto name = kv.first.as<std::string>("");
    const auto path = s.at("tokens") + "." + name;
    if (!valid_name(name)) {
      r.error(kv.first, path, "a token's name must be letters, digits, '-', '_' or '.'");
      continue;
    }
    if (auto v = r.string(kv.second, path)) add_token(s, kv.second, path, name, *v, out);
  }
}

}  // namespace

void read_admin(const Section& s, AdminSettings& out) {
  auto& r = s.reader();
  if (!r.map(s.node(), s.path(), {"listen", "top", "token", "tokens"})) return;
  if (s.has("listen")) out.listen = read_endpoint(r, s["listen"], s.at("listen"));
  read_admin_tokens(s, out);
  if (!s.has("top")) return;
  if (s["top"].IsScalar()) {  // `top: off` (or false)
    auto v = r.string(s["top"], s.at("top"));
    if (v && (*v == "off" || *v == "false"))
      out.top.enabled = false;
    else if (v && *v != "on" && *v != "true")
      r.error(s["top"], s.at("top"), "expected off, or a map with k and window");
    return;
  }
  Section t(r, s["top"], s.at("top"));
  if (!r.map(t.node(), t.path(), {"k", "window"})) return;
  t.integer("k", out.top.k, 1, 1000);
  t.duration("window", out.top.window, Duration(1000));
}

void read_log(const Section& s, LogSettings& out) {
  auto& r = s.reader();
  if (!r.map(s.node(), s.path(),
             {"level", "format", "access_log", "replay_fields", "replay_hashed"}))
    return;
  s.choice<LogLevel>("level", out.level,
                     {{"trace", LogLevel::trace},
                      {"debug", LogLevel::debug},
                      {"info", LogLevel::info},
                      {"warn", LogLevel::warn},
                      {"error", LogLevel::error},
                      {"off", LogLevel::off}});
  s.choice<LogFormat>("format", out.format, {{"text", LogFormat::text}, {"json", LogFormat::json}});
  s.boolean("access_log", out.access_log);
}

namespace {

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

void read_store(const Section& s, StoreSettings& out) {
  auto& r = s.reader();
  if (!r.map(s.node(), s.path(),
             {"backend", "redis", "key_prefix", "key_secret", "instances", "max_keys"}))
    return;
  s.choice<StoreBackend>("backend", out.backend,
                         {{"memory", StoreBackend::memory},
                          {"redis", StoreBackend::redis},
                          {"redis_cluster", StoreBackend::redis_cluster}});
  s.string("key_prefix", out.key_prefix);
  s.string("key_secret", out.key_secret);
  s.integer("instances", out.instances, 1, 10000);
  s.integer("max_keys", out.max_keys, 1000, 1'000'000'000);
  if (s.has("key_prefix") && out.key_prefix.find_first_of("{} \t") != std::string::npos)
    r.error(s["key_prefix"], s.at("key_prefix"), "must not contain braces or spaces");
  bool wants_redis = out.backend != StoreBackend::memory;
  if (s.has("redis")) {
    Section rs(r, s["redis"], s.at("redis"));
    if (r.map(rs.node(), rs.path(), {"address", "nodes", "username", "password", "timeout"})) {
      if (rs.has("address"))
        if (auto ep = read_endpoint(r, rs["address"], rs.at("address"))) out.redis.address = *ep;
      if (rs.has("nodes"))
        for (const auto& e : r.sequence(rs["nodes"], rs.at("nodes")))
          if (auto ep = read_endpoint(r, e, rs.at("nodes"))) out.redis.nodes.push_back(*ep);
      rs.string("username", out.redis.username);
      rs.string("password", out.redis.password);
      rs.duration("timeout", out.redis.timeout);
    }
  }
  if (wants_redis && !s.has("redis"))
    r.error(s.node(), s.path(),
            std::string("backend ") + to_string(out.backend) + " needs a \"redis\" section");
  if (out.backend == StoreBackend::redis_cluster && s.has("redis") && out.redis.nodes.empty())
    r.error(s["redis"], s.at("redis"),
            "backend redis_cluster needs at least one address in \"nodes\"");
  if (s.has("key_secret") && !out.key_secret.empty() && out.key_secret.size() < 16)
    r.warn(s["key_secret"], s.at("key_secret"), "shorter than 16 bytes: easy to guess");
}

void read_jwt(const Section& s, JwtSettings& out) {
  auto& r = s.reader();
  if (!r.map(s.node(), s.path(),
             {"header", "algorithms", "hs256_secret", "public_keys", "jwks", "issuer", "audience",
              "leeway"}))
    return;
  s.string("header", out.header);
  s.string("hs256_secret", out.hs256_secret);
  s.string("issuer", out.issuer);
  s.string("audience", out.audience);
  s.duration("leeway", out.leeway, Duration(0));
  bool keys_ok = true;
  if (s.has("public_keys")) {
    for (const auto& e : r.sequence(s["public_keys"], s.at("public_keys"))) {
      auto p = r.string(e, s.at("public_keys"));
      if (!p) {
        keys_ok = false;
        continue;
      }
      *p = r.resolve_path(*p);
      out.public_keys.push_back(*p);
      auto key = read_public_key(*p);
      if (auto* why = std::get_if<std::string>(&key)) {
        r.error(e, s.at("public_keys"), "cannot read public key from " + *p + ": " + *why);
        keys_ok = false;
      } else {
        out.keys.push_back(std::get<std::shared_ptr<evp_pkey_st>>(std::move(key)));
      }
    }
  }
  if (s.has("jwks")) out.jwks = read_jwks(Section(r, s["jwks"], s.at("jwks")));
  if (s.require("algorithms")) {
    for (const auto& e : r.sequence(s["algorithms"], s.at("algorithms"))) {
      if (e.IsScalar() && (e.Scalar() == "none" || e.Scalar() == "NONE")) {
        r.error(e, s.at("algorithms"), "\"none\" is never accepted: tokens must be signed");
        continue;
      }
      auto a = r.choice<JwtAlgorithm>(e, s.at("algorithms"),
                                      {{"HS256", JwtAlgorithm::hs256},
                                       {"RS256", JwtAlgorithm::rs256},
                                       {"ES256", JwtAlgorithm::es256},
                                       {"EdDSA", JwtAlgorithm::eddsa}});
      if (a && std::find(out.algorithms.begin(), out.algorithms.end(), *a) == out.algorithms.end())
        out.algorithms.push_back(*a);
    }
  }
  auto uses = [&](JwtAlgorithm a) {
    return std::find(out.algorithms.begin(), out.algorithms.end(), a) != out.algorithms.end();
  };
  if (uses(JwtAlgorithm::hs256) && out.hs256_secret.empty())
    r.error(s.node(), s.path(), "HS256 needs \"hs256_secret\"");
  if ((uses(JwtAlgorithm::rs256) || uses(JwtAlgorithm::es256) || uses(JwtAlgorithm::eddsa)) &&
      out.public_keys.empty() && !s.has("jwks"))
    r.error(s.node(), s.path(), "RS256, ES256 and EdDSA need \"public_keys\" or \"jwks\"");
  // Every key read, but none of the kind an allowed algorithm needs: all such tokens would fail.
  auto has_key = [&](const char* type) {
    return std::any_of(out.keys.begin(), out.keys.end(),
                       [&](const auto& k) { return EVP_PKEY_is_a(k.get(), type) == 1; });
  };
  if (keys_ok && !out.keys.empty()) {
    if (uses(JwtAlgorithm::rs256) && !has_key("RSA"))
      r.warn(s["public_keys"], s.at("public_keys"),
             "RS256 is allowed but no RSA key is listed: every RS256 token will be rejected");
    if (uses(JwtAlgorithm::es256) && !has_key("EC"))
      r.warn(s["public_keys"], s.at("public_keys"),
             "ES256 is allowed but no EC P-256 key is listed: every ES256 token will be rejected");
  }
}

}  // namespace floodgate::config
