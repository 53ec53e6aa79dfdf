// The server, admin, log and store sections (upstreams: load_upstreams.cpp; jwt: load_jwt.cpp).
#include <algorithm>
#include <cctype>
#include <string>

#include "floodgate/tls/contexts.hpp"
#include "sections.hpp"

namespace floodgate::config {

bool valid_name(std::string_view name) {
  return !name.empty() && name.size() <= 64 && std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
  });
}

void read_server(const Section& s, ServerSettings& out, bool rls_only) {
  auto& r = s.reader();
  if (!r.map(s.node(), s.path(),
             {"listen", "threads", "pop", "client_ip", "timeouts", "max_header_bytes",
              "max_body_bytes", "max_connections", "max_delayed", "http2"}))
    return;
  // A config serving only Envoy's rate limit service may have no HTTP listener.
  if (rls_only ? s.has("listen") : s.require("listen")) {
    const auto& n = s["listen"];
    auto items = n.IsSequence() ? r.sequence(n, s.at("listen")) : std::vector<YAML::Node>{n};
    for (std::size_t i = 0; i < items.size(); ++i)
      if (auto l = read_listener(r, items[i], s.at("listen") + "[" + std::to_string(i) + "]"))
        out.listen.push_back(*l);
    if (items.empty() && !rls_only) r.error(n, s.at("listen"), "at least one address is required");
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
  // `true` (stdout), or `{ path, stdout }`: a file (reopened on SIGUSR1), stdout too if asked.
  if (s.has("access_log") && s["access_log"].IsMap()) {
    Section a(r, s["access_log"], s.at("access_log"));
    if (!r.map(a.node(), a.path(), {"path", "stdout"})) return;
    out.access_log = true;
    out.access_log_stdout = false;
    if (a.require("path")) {
      a.string("path", out.access_log_path);
      if (out.access_log_path.empty())
        r.error(a["path"], a.at("path"), "must name a file");
      else
        out.access_log_path = r.resolve_path(out.access_log_path);
    }
    a.boolean("stdout", out.access_log_stdout);
  } else {
    s.boolean("access_log", out.access_log);
  }
}

namespace {

void read_redis_tls(const Section& s, RedisSettings& out) {
  auto& r = s.reader();
  if (!r.map(s.node(), s.path(), {"ca_file", "cert", "key", "server_name"})) return;
  RedisTls tls;
  s.string("ca_file", tls.ca_file);
  s.string("cert", tls.cert);
  s.string("key", tls.key);
  s.string("server_name", tls.server_name);
  for (auto* path : {&tls.ca_file, &tls.cert, &tls.key})
    if (!path->empty()) *path = r.resolve_path(*path);
  if (s.has("cert") != s.has("key")) {
    const char* given = s.has("cert") ? "cert" : "key";
    r.error(s[given], s.at(given), "a client certificate needs both \"cert\" and \"key\"");
  } else {
    auto ctx = tls::make_client_context(tls.ca_file, tls.cert, tls.key, false);
    if (auto* why = std::get_if<std::string>(&ctx)) {
      // Point at the file named, when one is.
      const char* at = "ca_file";
      if (s.has("cert") && why->find(tls.cert) != std::string::npos) at = "cert";
      if (s.has("key") && why->find(tls.key) != std::string::npos) at = "key";
      if (s.has(at))
        r.error(s[at], s.at(at), *why);
      else
        r.error(s.node(), s.path(), *why);
    } else {
      tls.context = std::get<std::shared_ptr<ssl_ctx_st>>(std::move(ctx));
    }
  }
  out.tls = std::move(tls);
}

void read_sentinels(const Section& rs, StoreSettings& out) {
  auto& r = rs.reader();
  if (rs.has("sentinels"))
    for (const auto& e : r.sequence(rs["sentinels"], rs.at("sentinels")))
      if (auto ep = read_endpoint(r, e, rs.at("sentinels"))) out.redis.sentinels.push_back(*ep);
  rs.string("master_name", out.redis.master_name);
  rs.string("sentinel_username", out.redis.sentinel_username);
  rs.string("sentinel_password", out.redis.sentinel_password);
  if (!rs.has("sentinels")) {
    for (const char* k : {"master_name", "sentinel_username", "sentinel_password"})
      if (rs.has(k)) r.error(rs[k], rs.at(k), std::string(k) + " only applies with \"sentinels\"");
    return;
  }
  if (out.backend != StoreBackend::redis)
    r.error(rs["sentinels"], rs.at("sentinels"),
            "sentinels need backend redis (a cluster finds its masters itself)");
  else if (out.redis.sentinels.empty())
    r.error(rs["sentinels"], rs.at("sentinels"), "needs at least one sentinel");
  if (!rs.has("master_name") || out.redis.master_name.empty())
    r.error(rs["sentinels"], rs.at("sentinels"),
            "sentinels need \"master_name\" (the name the sentinels monitor)");
  if (rs.has("address"))
    r.error(rs["address"], rs.at("address"),
            "give either address or sentinels: with sentinels, they name the master");
}

}  // namespace

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
    if (r.map(rs.node(), rs.path(),
              {"address", "nodes", "username", "password", "timeout", "tls", "sentinels",
               "master_name", "sentinel_username", "sentinel_password"})) {
      if (rs.has("address"))
        if (auto ep = read_endpoint(r, rs["address"], rs.at("address"))) out.redis.address = *ep;
      if (rs.has("nodes"))
        for (const auto& e : r.sequence(rs["nodes"], rs.at("nodes")))
          if (auto ep = read_endpoint(r, e, rs.at("nodes"))) out.redis.nodes.push_back(*ep);
      rs.string("username", out.redis.username);
      rs.string("password", out.redis.password);
      rs.duration("timeout", out.redis.timeout);
      if (rs.has("tls")) read_redis_tls(Section(r, rs["tls"], rs.at("tls")), out.redis);
      read_sentinels(rs, out);
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

}  // namespace floodgate::config
