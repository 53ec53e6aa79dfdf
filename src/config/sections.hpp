#pragma once
// One reader per top-level section of the YAML; each fills its part of the Config and
// reports problems through the YamlReader. Cross-section checks live in loader.cpp.

#include "floodgate/config/config.hpp"
#include "yaml_reader.hpp"

namespace floodgate::config {

// `rls_only`: the config serves only Envoy's rate limit service (listen may be empty).
void read_server(const Section& s, ServerSettings& out, bool rls_only);
// HOST:PORT or [V6]:PORT; one entry of server.listen (load_listeners.cpp).
std::optional<Endpoint> read_endpoint(YamlReader& r, const YAML::Node& n, const std::string& path);
// `grpc_only`: an rls.listen entry (HTTP/2 only: h2c, or h2 by ALPN with tls; no protocols).
std::optional<Listener> read_listener(YamlReader& r, const YAML::Node& n, const std::string& path,
                                      bool grpc_only = false);
void read_admin(const Section& s, AdminSettings& out);
void read_log(const Section& s, LogSettings& out);
void read_upstreams(const Section& s, std::vector<Upstream>& out);
void read_store(const Section& s, StoreSettings& out);
void read_jwt(const Section& s, JwtSettings& out);
void read_routes(YamlReader& r, const YAML::Node& n, std::vector<Route>& out);
// One limit: a route's, or an RLS descriptor rule's (no key, cost, settle, count or delay:
// the descriptor is its key, hits_addend its cost, and no response follows).
enum class LimitUse { route, rls };
std::optional<Limit> read_limit(YamlReader& r, const YAML::Node& n, const std::string& path,
                                LimitUse use);
// `rls:` (load_rls.cpp): its listeners and domains; each domain's limits become a route
// appended to `routes` (after the HTTP routes' checks).
void read_rls(const Section& s, const StoreSettings& store, RlsSettings& out,
              std::vector<Route>& routes);
// A limit's lease checked against the store (its default size needs store.instances).
void check_lease(YamlReader& r, const YAML::Node& n, const std::string& path,
                 const StoreSettings& store, Limit& l);

// "ip", "header:NAME", "jwt:CLAIM", ... (the key part syntax); reports an unknown one.
std::optional<KeyPart> read_key_part(YamlReader& r, const YAML::Node& n, const std::string& path);
// The same for text from elsewhere (a list file): nullopt when it is not a key part, with
// unknown_key_part() saying why.
std::optional<KeyPart> parse_key_part(std::string_view text);
std::string unknown_key_part(std::string_view text);

// `lists:` (global, or a route's): allow and deny lists, with their files read (load_lists.cpp).
void read_lists(const Section& s, Lists& out);

// `refusal:` (global, or a route's): the operator's refusal answer, its file read
// (load_refusal.cpp). Null when it has an error.
std::shared_ptr<const RefusalPage> read_refusal(const Section& s);

// A limit's options (load_limit_options.cpp). is_bucket: token_bucket or gcra; ceiling: the
// most a single request may cost under `p` (capacity, or limit); settles: the algorithms a
// charge can be corrected on afterwards (settle, count).
bool is_bucket(Algorithm a);
std::int64_t ceiling(Algorithm a, const LimitParams& p);
bool settles(Algorithm a);
void read_lease(const Section& s, Limit& l);
void read_rollout(Section& s, Limit& l);
void read_on_exceed(Section& s, Limit& l);
void read_count(Section& s, Limit& l);

// A quota's `period`, `timezone` and `anchor_day` (load_period.cpp), the zone read from
// tzdata; for any other algorithm an error for each of them that is set. Null then, or on error.
std::shared_ptr<const calendar::Period> read_period(const Section& s, Algorithm a);

// `url` and `ca_file` of `s` (load_https_url.cpp): split, with a client context for ca_file;
// `what` says in an error what is fetched ("keys are"). False (an error reported) otherwise.
bool read_https_url(const Section& s, HttpsUrl& out, std::string_view what);
// `jwt.jwks` (load_jwks.cpp): its url split, refresh, and a client context for ca_file.
std::optional<JwksSettings> read_jwks(const Section& s);
// `config_source` (load_config_source.cpp): the url, poll, the public key read, the cache.
std::optional<FeedSettings> read_config_source(const Section& s);

// A route's `path_template`: one template or a list (path_template.cpp).
void read_path_templates(const Section& s, std::vector<PathTemplate>& out);

// Expands and checks log.replay_fields / log.replay_hashed once the routes are known.
void resolve_replay_fields(YamlReader& r, const YAML::Node& root, Config& c);

// A name used in headers, metrics labels and logs: letters, digits, '-', '_' and '.'.
bool valid_name(std::string_view name);

}  // namespace floodgate::config
