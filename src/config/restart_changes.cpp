// What a SIGHUP cannot apply: the sockets and threads a running instance already has.
#include <string>
#include <vector>

#include "floodgate/config/loader.hpp"
#include "floodgate/config/units.hpp"

namespace floodgate::config {

namespace {

std::string listeners_text(const std::vector<Listener>& listeners) {
  std::string out;
  for (const auto& l : listeners) {
    if (!out.empty()) out += ", ";
    out += l.address.to_string();
    out += l.tls ? " (tls " : " (";
    for (std::size_t i = 0; i < l.protocols.size(); ++i) {
      if (i) out += ' ';
      out += to_string(l.protocols[i]);
    }
    out += ')';
  }
  return out.empty() ? "none" : out;
}

std::string access_log_text(const LogSettings& l) {
  if (l.access_log_path.empty()) return "stdout";
  return l.access_log_path + (l.access_log_stdout ? " and stdout" : "");
}

std::string store_text(const StoreSettings& s) {
  std::string out = to_string(s.backend);
  if (s.backend == StoreBackend::redis && s.redis.sentinels.empty())
    out += " " + s.redis.address.to_string();
  if (s.backend == StoreBackend::redis && !s.redis.sentinels.empty()) {
    out += " master " + s.redis.master_name + " via sentinels";
    for (const auto& n : s.redis.sentinels) out += " " + n.to_string();
    if (!s.redis.sentinel_username.empty()) out += " as " + s.redis.sentinel_username;
  }
  if (s.backend == StoreBackend::redis_cluster)
    for (const auto& n : s.redis.nodes) out += " " + n.to_string();
  if (s.backend != StoreBackend::memory && !s.redis.username.empty())
    out += " as " + s.redis.username;
  // Each worker's store is built at start with its per-decision budget.
  if (s.backend != StoreBackend::memory) out += ", timeout " + format_duration(s.redis.timeout);
  if (s.backend != StoreBackend::memory && s.redis.tls) {
    const auto& t = *s.redis.tls;
    out += " over TLS (ca_file " + (t.ca_file.empty() ? "system" : t.ca_file);
    if (!t.cert.empty()) out += ", cert " + t.cert + ", key " + t.key;
    if (!t.server_name.empty()) out += ", server_name " + t.server_name;
    out += ")";
  }
  return out;
}

}  // namespace

std::vector<std::string> restart_only_changes(const Config& before, const Config& after) {
  // `before` is what runs: the config the process started with, for these settings.
  std::vector<std::string> out;
  auto note = [&](const std::string& what, const std::string& was, const std::string& now) {
    if (was != now)
      out.push_back(what + ": " + now + " (was " + was + ") takes effect only after a restart; " +
                    "still " + was);
  };
  note("server.listen", listeners_text(before.server.listen), listeners_text(after.server.listen));
  note("rls.listen", listeners_text(before.rls.listen), listeners_text(after.rls.listen));
  note("server.threads", before.server.threads ? std::to_string(before.server.threads) : "auto",
       after.server.threads ? std::to_string(after.server.threads) : "auto");
  note("admin.listen", before.admin.listen ? before.admin.listen->to_string() : "off",
       after.admin.listen ? after.admin.listen->to_string() : "off");
  note("store", store_text(before.store), store_text(after.store));
  // Where the lines go (on or off applies at once: every request reads the snapshot).
  if (!before.log.access_log_path.empty() || !after.log.access_log_path.empty())
    note("log.access_log", access_log_text(before.log), access_log_text(after.log));
  if (before.store.redis.password != after.store.redis.password &&
      after.store.backend != StoreBackend::memory)
    out.push_back(
        "store.redis.password: the new one takes effect only after a restart (connections "
        "already authenticated keep working)");
  if (before.store.redis.sentinel_password != after.store.redis.sentinel_password &&
      !after.store.redis.sentinels.empty())
    out.push_back("store.redis.sentinel_password: the new one takes effect only after a restart");
  return out;
}

ConfigPtr as_running(const Config& started, const ConfigPtr& next) {
  const auto& a = started.store.redis;
  const auto& b = next->store.redis;
  // store_text names the backend and every connection setting in use but the secrets.
  if (started.server.threads == next->server.threads &&
      started.admin.listen == next->admin.listen &&
      store_text(started.store) == store_text(next->store) && a.password == b.password &&
      a.sentinel_password == b.sentinel_password &&
      started.log.access_log_path == next->log.access_log_path &&
      started.log.access_log_stdout == next->log.access_log_stdout)
    return next;
  auto running = std::make_shared<Config>(*next);
  running->server.threads = started.server.threads;
  running->admin.listen = started.admin.listen;
  running->store.backend = started.store.backend;
  // Every connection setting is the started one (the TLS context too), and so is the
  // per-decision timeout: each worker's store was built with it.
  running->store.redis = a;
  running->log.access_log_path = started.log.access_log_path;
  running->log.access_log_stdout = started.log.access_log_stdout;
  return running;
}

}  // namespace floodgate::config
