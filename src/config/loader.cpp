#include "floodgate/config/loader.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>
#include <tuple>

#include <openssl/evp.h>

#include "sections.hpp"

namespace floodgate::config {

// A lease's default size needs store.instances: max(1, capacity (or limit) / (10 * instances)).
void check_lease(YamlReader& r, const YAML::Node& n, const std::string& path,
                 const StoreSettings& store, Limit& l) {
  const bool bucket = l.algorithm == Algorithm::token_bucket || l.algorithm == Algorithm::gcra;
  const std::int64_t ceiling = bucket ? l.params.capacity : l.params.limit;
  if (l.lease->size == 0)
    l.lease->size = std::max<std::int64_t>(1, ceiling / (10 * std::int64_t(store.instances)));
  if (store.backend == StoreBackend::memory)
    r.warn(n, path, "has no effect on the memory backend (its decisions are already local)");
  else if (l.cost.from_header.empty() && l.lease->size <= l.cost.fixed)
    // An instance holds at most `size` units, its requests' own included: nothing is left
    // for the hand, and every request asks the store.
    r.warn(n, path,
           "size " + std::to_string(l.lease->size) +
               " leaves no unit in hand beside a request's "
               "own (cost " +
               std::to_string(l.cost.fixed) +
               "): every request asks the store; give "
               "it a size above the cost");
}

namespace {

// Whether every request `later` matches is matched by `earlier` first (routes are tried in
// order): the same host or any, the same methods or more, a path it covers.
bool covers(const RouteMatch& earlier, const RouteMatch& later) {
  if (!earlier.host.empty() && earlier.host != later.host) return false;
  if (!earlier.methods.empty()) {
    if (later.methods.empty()) return false;
    for (const auto& m : later.methods)
      if (std::find(earlier.methods.begin(), earlier.methods.end(), m) == earlier.methods.end())
        return false;
  }
  if (!earlier.path.empty()) return later.path == earlier.path;
  const auto& p = later.path.empty() ? later.path_prefix : later.path;
  return std::string_view(p).starts_with(earlier.path_prefix);
}

// Checks that need more than one section: references between them and the JWT claims the
// limits rely on.
// Lists that name a claim need tokens verified to read it (unverified, never).
void check_list_claims(YamlReader& r, const YAML::Node& at, const std::string& path,
                       const Lists& lists, const Config& c) {
  if (c.jwt) return;
  for (const auto* list : {&lists.deny, &lists.allow})
    for (const auto& v : list->values)
      if (v.part.kind == KeyPart::Kind::jwt) {
        r.error(at, path,
                "names " + v.part.text + " but there is no \"jwt\" section to verify tokens");
        return;
      }
}

void cross_check(YamlReader& r, const YAML::Node& root, Config& c) {
  if (!c.lists.empty()) check_list_claims(r, root["lists"], "lists", c.lists, c);
  for (std::size_t i = 0; i < c.routes.size(); ++i) {
    auto& rt = c.routes[i];
    const YAML::Node node = root["routes"][i];
    std::string path = "routes[" + std::to_string(i) + "]";
    if (!rt.lists.empty()) check_list_claims(r, node["lists"], path + ".lists", rt.lists, c);
    for (std::size_t j = 0; j < i; ++j)
      if (covers(c.routes[j].match, rt.match)) {
        r.warn(node, path,
               "can never match: routes[" + std::to_string(j) + "] (\"" + c.routes[j].name +
                   "\") comes first and matches every request it would");
        break;
      }
    if (c.store.backend == StoreBackend::memory && rt.on_store_error == OnStoreError::fail_closed)
      r.warn(node["on_store_error"], path + ".on_store_error",
             "fail_closed has no effect on the memory backend: the embedded store cannot fail");
    bool found = false;
    std::vector<std::string_view> names;
    for (std::size_t u = 0; u < c.upstreams.size(); ++u) {
      names.push_back(c.upstreams[u].name);
      if (c.upstreams[u].name == rt.upstream) rt.upstream_index = u, found = true;
    }
    if (!found && !rt.upstream.empty())
      r.error(node["upstream"], path + ".upstream",
              "no upstream named \"" + rt.upstream + "\"" + YamlReader::hint(rt.upstream, names));
    for (std::size_t j = 0; j < rt.limits.size(); ++j) {
      auto& l = rt.limits[j];
      if (l.lease)
        check_lease(r, node["limits"][j]["lease"],
                    path + ".limits[" + std::to_string(j) + "].lease", c.store, l);
      bool needs_jwt = l.overrides.has_value();
      for (const auto& k : l.key) needs_jwt |= k.kind == KeyPart::Kind::jwt;
      if (needs_jwt && !c.jwt)
        r.error(node["limits"][j], path + ".limits[" + std::to_string(j) + "]",
                "uses a jwt: claim but there is no \"jwt\" section to verify tokens");
      const bool any_tls = std::any_of(c.server.listen.begin(), c.server.listen.end(),
                                       [](const Listener& x) { return x.tls.has_value(); });
      for (const auto& k : l.key)
        if (k.kind == KeyPart::Kind::tls && !any_tls) {
          r.warn(node["limits"][j]["key"], path + ".limits[" + std::to_string(j) + "].key",
                 k.text + " is missing on every request: no listener terminates TLS");
          break;
        }
    }
  }
  if (!c.admin.tokens.empty() && !c.admin.listen)
    r.warn(root["admin"], "admin",
           "a token has no effect without admin.listen: there is no API to open");
  if (c.admin.listen) {
    for (const auto& l : c.server.listen)
      if (l.address.port != 0 && l.address.port == c.admin.listen->port &&
          l.address.host == c.admin.listen->host)
        r.error(root["admin"]["listen"], "admin.listen",
                "must differ from the traffic listeners (" + l.address.to_string() + ")");
  }
}

// Where a document comes from: the file given to --config (or --check-config), or
// config_source's url.
enum class Origin { file, fetched };

// `config_source:` in a file: nothing else beside it (the config to serve is fetched).
void read_feed_root(YamlReader& r, const YAML::Node& root, Origin origin, Config& c) {
  if (origin == Origin::fetched) {
    r.error(root["config_source"], "config_source",
            "a config fetched from config_source cannot name a config_source of its own");
    return;
  }
  for (const auto& entry : root) {
    const auto key = entry.first.as<std::string>("");
    if (key != "config_source")
      r.error(entry.first, key,
              "beside config_source: a file that names config_source holds nothing else (the "
              "config to serve, with its \"" +
                  key + "\", is the document at the url)");
  }
  c.feed = read_config_source(Section(r, root["config_source"], "config_source"));
}

void read_root(YamlReader& r, const YAML::Node& root, Origin origin, Config& c) {
  if (!r.map(root, "",
             {"version", "config_source", "server", "admin", "log", "upstreams", "store", "jwt",
              "lists", "refusal", "routes", "rls"}))
    return;
  Section top(r, root, "");
  if (top.has("config_source")) return read_feed_root(r, root, origin, c);
  if (top.has("version"))
    c.version = r.integer(root["version"], "version", 0, std::numeric_limits<std::int64_t>::max());
  else if (origin == Origin::fetched)
    r.error(root, "version",
            "\"version\" is required of a config fetched from config_source (an integer that "
            "goes up with each config published)");
  // A config that only serves Envoy's rate limit service needs no HTTP routes or upstreams.
  const bool rls_only = top.has("rls") && !top.has("routes") && !top.has("upstreams");
  if (top.require("server")) read_server(Section(r, root["server"], "server"), c.server, rls_only);
  if (top.has("admin")) read_admin(Section(r, root["admin"], "admin"), c.admin);
  if (top.has("log")) read_log(Section(r, root["log"], "log"), c.log);
  if (rls_only ? top.has("upstreams") : top.require("upstreams"))
    read_upstreams(Section(r, root["upstreams"], "upstreams"), c.upstreams);
  if (top.has("store")) read_store(Section(r, root["store"], "store"), c.store);
  if (top.has("jwt")) {
    c.jwt.emplace();
    read_jwt(Section(r, root["jwt"], "jwt"), *c.jwt);
  }
  if (top.has("lists")) read_lists(Section(r, root["lists"], "lists"), c.lists);
  if (rls_only ? top.has("routes") : top.require("routes"))
    read_routes(r, root["routes"], c.routes);
  if (top.has("refusal"))
    if (auto page = read_refusal(Section(r, root["refusal"], "refusal")))
      for (auto& rt : c.routes)
        if (!rt.refusal) rt.refusal = page;
  cross_check(r, root, c);
  // After the HTTP routes' checks: the RLS domains' routes follow them in c.routes.
  if (top.has("rls")) read_rls(Section(r, root["rls"], "rls"), c.store, c.rls, c.routes);
  resolve_replay_fields(r, root, c);
  // limit_inputs: the limits' and the lists' inputs; the log's may add more.
  for (const auto& fields : {limit_inputs(c), c.log.replay_fields})
    for (const auto& f : fields) c.tls_fingerprints |= f.kind == ReplayField::Kind::tls;
  bool limits = std::any_of(c.routes.begin(), c.routes.end(),
                            [](const Route& rt) { return !rt.limits.empty(); });
  // (Not when the value failed, an unset variable say: that has its own error.)
  const YAML::Node secret =
      top.has("store") && root["store"].IsMap() ? root["store"]["key_secret"] : YAML::Node();
  if (limits && c.store.key_secret.empty() && !r.has_error_at(secret))
    r.warn(top.has("store") ? root["store"] : root, "store.key_secret",
           "not set: client identifiers are hashed with a built-in key; set it (the same on "
           "every instance) so that store keys cannot be linked to clients");
}

}  // namespace

std::string Diagnostic::to_string() const {
  return file + ":" + std::to_string(line) + ":" + std::to_string(column) + ": " + message;
}

EnvLookup process_env() {
  return [](const std::string& name) -> std::optional<std::string> {
    if (const char* v = std::getenv(name.c_str())) return std::string(v);
    return std::nullopt;
  };
}

namespace {

// The SHA-256 of `bytes` in lower-case hex.
std::string sha256_hex(std::string_view bytes) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  if (EVP_Digest(bytes.data(), bytes.size(), digest, &size, EVP_sha256(), nullptr) != 1) return "";
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < size; ++i) {
    out += kHex[digest[i] >> 4];
    out += kHex[digest[i] & 15];
  }
  return out;
}

LoadResult load(std::string_view yaml, const std::string& file_name, const std::string& base_dir,
                Origin origin, const EnvLookup& env) {
  LoadResult result;
  auto config = std::make_shared<Config>();
  config->source = file_name;
  config->sha256 = sha256_hex(yaml);
  YamlReader reader(file_name, env, result.errors, result.warnings, base_dir);
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml));
  } catch (const YAML::Exception& e) {
    reader.error_at(e.mark, "invalid YAML: " + e.msg);
    return result;
  }
  if (!given(root)) {
    reader.error_at(YAML::Mark(), "the file is empty");
    return result;
  }
  try {
    read_root(reader, root, origin, *config);
  } catch (const YAML::Exception& e) {
    // yaml-cpp throws on shapes our readers did not anticipate (a map used as a key, ...).
    reader.error_at(e.mark, "unexpected structure: " + e.msg);
  }
  // In file order: a section read later may report an earlier line.
  // The config's own lines first, then those of the files it names (lists), each in order.
  auto by_place = [&](const Diagnostic& a, const Diagnostic& b) {
    return std::make_tuple(a.file != file_name, std::cref(a.file), a.line, a.column) <
           std::make_tuple(b.file != file_name, std::cref(b.file), b.line, b.column);
  };
  std::stable_sort(result.errors.begin(), result.errors.end(), by_place);
  std::stable_sort(result.warnings.begin(), result.warnings.end(), by_place);
  result.unset = reader.unset();
  if (result.errors.empty()) result.config = std::move(config);
  return result;
}

}  // namespace

LoadResult load_config_text(std::string_view yaml, const std::string& file_name,
                            const EnvLookup& env) {
  return load(yaml, file_name, "", Origin::file, env);
}

LoadResult load_fetched_config(std::string_view yaml, const std::string& name,
                               const std::string& base_dir, const EnvLookup& env) {
  return load(yaml, name, base_dir, Origin::fetched, env);
}

LoadResult load_config_file(const std::string& path, const EnvLookup& env) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    const int err = errno;  // what the open failed with (ifstream leaves it set)
    LoadResult r;
    r.errors.push_back(
        {path, 0, 0, std::string("cannot read the file: ") + std::strerror(err ? err : ENOENT)});
    return r;
  }
  std::ostringstream text;
  text << in.rdbuf();
  return load_config_text(text.str(), path, env);
}

const char* to_string(Protocol p) {
  switch (p) {
    case Protocol::http1:
      return "http1";
    case Protocol::h2:
      return "h2";
    case Protocol::h3:
      return "h3";
    case Protocol::h2c:
      return "h2c";
  }
  return "?";
}

const char* to_string(Algorithm a) {
  switch (a) {
    case Algorithm::token_bucket:
      return "token_bucket";
    case Algorithm::gcra:
      return "gcra";
    case Algorithm::sliding_window:
      return "sliding_window";
    case Algorithm::sliding_log:
      return "sliding_log";
    case Algorithm::fixed_window:
      return "fixed_window";
    case Algorithm::concurrency:
      return "concurrency";
    case Algorithm::quota:
      return "quota";
  }
  return "?";
}

const char* to_string(StoreBackend b) {
  switch (b) {
    case StoreBackend::memory:
      return "memory";
    case StoreBackend::redis:
      return "redis";
    case StoreBackend::redis_cluster:
      return "redis_cluster";
  }
  return "?";
}

const char* to_string(OnStoreError e) {
  switch (e) {
    case OnStoreError::fail_open:
      return "fail_open";
    case OnStoreError::fail_closed:
      return "fail_closed";
    case OnStoreError::local:
      return "local";
  }
  return "?";
}

const char* to_string(LogLevel l) {
  switch (l) {
    case LogLevel::trace:
      return "trace";
    case LogLevel::debug:
      return "debug";
    case LogLevel::info:
      return "info";
    case LogLevel::warn:
      return "warn";
    case LogLevel::error:
      return "error";
    case LogLevel::off:
      return "off";
  }
  return "?";
}

}  // namespace floodgate::config
