// floodgate: command line, wiring and signals. Everything else lives in floodgate_core.
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>

#include <cstdio>
#include <iostream>
#include <string>
#include <string_view>
#include <vector>

#include "admin/admin_server.hpp"
#include "config_feed.hpp"
#include "floodgate/config/config_source.hpp"
#include "floodgate/config/loader.hpp"
#include "floodgate/metrics/metrics.hpp"
#include "floodgate/server/server.hpp"
#include "floodgate/store/memory_store.hpp"
#include "floodgate/version.hpp"
#include "healthcheck_command.hpp"
#include "jwks_refresher.hpp"
#include "logging.hpp"
#include "override_sync.hpp"
#include "replay_command.hpp"
#include "stores.hpp"

namespace {

using namespace floodgate;

constexpr int kExitOk = 0;
constexpr int kExitRuntime = 1;
constexpr int kExitUsage = 2;  // also: invalid config

const char* kUsage =
    "usage: floodgate --config FILE        run the proxy\n"
    "       floodgate --check-config FILE  validate FILE and print a summary\n"
    "       floodgate --version            print the version\n"
    "       floodgate healthcheck [HOST:PORT]  exit 0 when the admin listener's /healthz\n"
    "                                      answers 200 (default $FLOODGATE_ADMIN_HEALTH,\n"
    "                                      else 127.0.0.1:9901)\n"
    "       floodgate replay --config FILE [--baseline FILE] [--json] [--html OUT] LOG...\n"
    "                                      what FILE's limits would have refused in LOG\n";

void print_diagnostics(const config::LoadResult& r) {
  for (const auto& w : r.warnings) std::cerr << w.to_string() << " (warning)\n";
  for (const auto& e : r.errors) std::cerr << e.to_string() << "\n";
}

int check_config(const std::string& path) {
  auto r = config::load_config_file(path);
  print_diagnostics(r);
  if (!r.config) {
    std::cerr << path << ": " << r.errors.size() << " error" << (r.errors.size() == 1 ? "" : "s")
              << "\n";
    return kExitUsage;
  }
  std::cout << config::summarize(*r.config);
  return kExitOk;
}

std::int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Publishes `next` (valid) in place of the config in force, with what only a restart changes
// kept as `started` has it (config::as_running): a SIGHUP's file, or config_source's document.
void publish(const config::ConfigPtr& next, config::ConfigSource& source,
             const config::Config& started, spdlog::logger& log, metrics::Metrics& metrics) {
  for (const auto& change : config::restart_only_changes(started, *next))
    log.warn("reload: {}", change);
  app::apply_log_settings(log, next->log);
  source.publish(config::as_running(started, next));
  metrics.config_applied_seconds.store(unix_now(), std::memory_order_relaxed);
}

// SIGHUP reloads: the new file is validated aside and published only when valid.
void reload(const std::string& path, config::ConfigSource& source, const config::Config& started,
            spdlog::logger& log, metrics::Metrics& metrics) {
  auto r = config::load_config_file(path);
  if (r.config && r.config->feed) {
    r.config = nullptr;
    r.errors.push_back({path, 0, 0,
                        "names config_source now: a file config cannot become a fetched one "
                        "without a restart"});
  }
  if (!r.config) {
    metrics.reloads_failed.fetch_add(1);
    for (const auto& e : r.errors) log.error("reload rejected: {}", e.to_string());
    log.error("reload rejected: {} error{}; the previous config keeps serving", r.errors.size(),
              r.errors.size() == 1 ? "" : "s");
    return;
  }
  for (const auto& w : r.warnings) log.warn("{}", w.to_string());
  publish(r.config, source, started, log, metrics);
  metrics.reloads_ok.fetch_add(1);
  log.info("reload: config from {} is now serving", path);
}

// The directory of `path` (with its slash), where a fetched config's relative paths start.
std::string directory_of(const std::string& path) {
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? "./" : path.substr(0, slash + 1);
}

int run(const std::string& path) {
  auto r = config::load_config_file(path);
  if (!r.config) {
    print_diagnostics(r);
    return kExitUsage;
  }
  auto log = app::make_logger(r.config->log);
  for (const auto& w : r.warnings) log->warn("{}", w.to_string());
  // The signals are taken from here on: one arriving while the start is under way (a reload
  // while config_source is fetched, say) waits for the loop below instead of killing the
  // process with its default action.
  boost::asio::io_context signals_ioc;
  boost::asio::signal_set signals(signals_ioc, SIGINT, SIGTERM, SIGHUP);
  signals.add(SIGUSR1);
  // config_source: the config to serve comes from its url (or the cache), not from the file.
  std::unique_ptr<app::ConfigFeed> feed;
  auto feed_outcome = metrics::Metrics::ConfigUpdate::applied;
  config::ConfigPtr started = r.config;
  if (r.config->feed) {
    feed = std::make_unique<app::ConfigFeed>(*r.config->feed, directory_of(path));
    auto first = feed->first(*log);
    if (!first.config) return kExitRuntime;
    started = first.config;
    feed_outcome = first.outcome;
    app::apply_log_settings(*log, started->log);
  }
  config::ConfigSource source(started);
  limit::SystemClock clock;
  // One in-process state shared by every worker: the embedded store and the `local` fallback.
  store::MemoryState memory(clock, started->store.max_keys);
  // And one book of leased units: every worker spends from it (SPEC "Leased decisions").
  store::LeaseBook leases;
  metrics::Metrics metrics(version(), started->server.pop);
  metrics.backend = config::to_string(started->store.backend);
  metrics.config_applied_seconds = unix_now();
  if (feed) metrics.count(feed_outcome);
  metrics.config_identity = [&source] {
    const auto c = source.get();
    return std::pair(c->version ? std::to_string(*c->version) : std::string(), c->sha256);
  };
  metrics.memory_evictions = [&memory] { return memory.evictions(); };
  admin::AdminState admin_state;
  // The access log's destinations are read at start (a reload that changes them says it takes
  // a restart); SIGUSR1 reopens its file.
  auto access_log = app::make_access_logger(started->log);
  if (!access_log.logger) {
    log->critical("{}", access_log.error);
    return kExitRuntime;
  }
  // Per-caller overrides (the admin API): kept in Redis and read by every instance sharing it,
  // or in this process for the memory store.
  limit::OverrideBoard overrides;
  std::unique_ptr<limit::OverrideKeeper> keeper;
  if (started->store.backend == config::StoreBackend::memory) {
    keeper = std::make_unique<limit::BoardKeeper>(overrides);
  } else {
    auto synced = std::make_unique<app::RedisOverrides>(started->store, overrides, clock, log);
    synced->start();
    keeper = std::move(synced);
  }
  // jwt.jwks: the issuer's keys, fetched before serving and kept fresh in the background.
  app::JwksRefresher jwks(source, metrics, log);
  jwks.start();
  // Store connection settings are read at start; changing them needs a restart.
  http::Server server(source, log,
                      {clock, app::configured_store_factory(*started, memory, leases, clock, log),
                       app::memory_store_factory(memory), metrics, access_log.logger.get(),
                       &overrides, &jwks.cell()});
  metrics.store_health = [&server] { return server.store_health(); };
  metrics.upstream_servers = [&server] { return server.upstream_servers(); };
  std::unique_ptr<admin::AdminServer> admin_server;
  try {
    server.start();
    if (started->admin.listen) {
      admin_server = std::make_unique<admin::AdminServer>(
          *started->admin.listen, source, metrics, admin_state, *log,
          admin::AdminApi{&server, keeper.get(), &overrides, &clock});
      admin_server->start();
      // The bound port, not the configured one (which may be 0).
      log->info("admin listening on {}",
                config::Endpoint{started->admin.listen->host, admin_server->port()}.to_string());
    }
  } catch (const std::system_error& e) {
    log->critical("{}", e.what());
    return kExitRuntime;
  }
  // server.listen's ports, then rls.listen's (Server::ports()).
  std::string ports, rls_ports;
  const auto bound = server.ports();
  const auto http_listeners = started->server.listen.size();
  for (std::size_t i = 0; i < bound.size(); ++i) {
    auto& list = i < http_listeners ? ports : rls_ports;
    list += (list.empty() ? "" : ", ") + std::to_string(bound[i]);
  }
  // config_source: later configs come from the url, published as a reload publishes a file's.
  // Its thread publishes to `source` and logs: stopped (by this guard) before they go, on
  // every way out.
  struct StopFeed {
    std::unique_ptr<app::ConfigFeed>& feed;
    ~StopFeed() { feed.reset(); }
  } stop_feed{feed};
  if (feed)
    feed->start(metrics, log, [&](const config::ConfigPtr& next) {
      publish(next, source, *started, *log, metrics);
      log->info("config_source: version {} (sha256 {}) from {} is now serving", *next->version,
                next->sha256.substr(0, 12), next->source);
    });
  log->info("floodgate {} serving {} on port(s) {}{}", version(), started->source,
            ports.empty() ? "(none)" : ports,
            rls_ports.empty() ? "" : "; Envoy's rate limit service on port(s) " + rls_ports);

  std::function<void(const boost::system::error_code&, int)> on_signal =
      [&](const boost::system::error_code& ec, int sig) {
        if (ec) return;
        if (sig == SIGHUP && feed) {  // the config comes from the url: ask it now
          log->info("signal {}: fetching config_source now ({} is not read again)", sig, path);
          feed->poll_now();
          signals.async_wait(on_signal);
          return;
        }
        if (sig == SIGHUP) {
          reload(path, source, *started, *log, metrics);
          signals.async_wait(on_signal);
          return;
        }
        if (sig == SIGUSR1) {  // logrotate moved the access log away: a new file, same path
          if (!access_log.file)
            log->info("signal {}: the access log is on stdout, nothing to reopen", sig);
          else if (auto why = access_log.file->open())
            log->error("signal {}: {}; the lines still go to the file open before", sig, *why);
          else
            log->info("signal {}: access log {} reopened", sig, access_log.file->path());
          signals.async_wait(on_signal);
          return;
        }
        auto grace = source.get()->server.timeouts.drain;
        log->info("signal {}: draining for up to {} ms", sig, grace.count());
        admin_state.draining = true;  // /readyz says 503 at once; the admin listener stays up
        server.drain(grace);
        if (admin_server) admin_server->stop();
        log->info("drained; exiting");
      };
  signals.async_wait(on_signal);
  signals_ioc.run();
  return kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string_view> args(argv + 1, argv + argc);
  if (args.size() == 1 && args[0] == "--version") {
    std::cout << "floodgate " << version() << "\n";
    return kExitOk;
  }
  if (args.size() == 1 && (args[0] == "--help" || args[0] == "-h")) {
    std::cout << kUsage;
    return kExitOk;
  }
  if (args.size() == 2 && args[0] == "--check-config") return check_config(std::string(args[1]));
  if (args.size() == 2 && args[0] == "--config") return run(std::string(args[1]));
  if (!args.empty() && args[0] == "replay") return app::replay_command(args);
  if (!args.empty() && args[0] == "healthcheck") return app::healthcheck_command(args);
  std::cerr << kUsage;
  return kExitUsage;
}
