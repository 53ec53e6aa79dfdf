#include "replay_command.hpp"

#include <unistd.h>

#include <charconv>
#include <iostream>

#include "replay/replay.hpp"

namespace floodgate::app {

namespace {

constexpr const char* kReplayUsage =
    "usage: floodgate replay --config CANDIDATE.yaml [--baseline CURRENT.yaml] [--json]\n"
    "                        [--html FILE] [--decisions FILE] [--top N] [--quiet]\n"
    "                        [--overrides FILE] LOG...\n"
    "       floodgate replay --config FILE --lease [--instances N] [--spread HOW] ... LOG...\n"
    "  LOG: floodgate's JSON access log or nginx `combined`, plain or gzipped; - for stdin.\n"
    "  Several logs (one per instance) are merged by time. Prints a report (text, or JSON\n"
    "  with --json); --html writes one with a plot; --decisions writes one line per request\n"
    "  (time, method, path, then route, verdict and limit per config). Progress on stderr.\n"
    "  --lease: the config's leased limits decided by N instances sharing one store (default\n"
    "  store.instances), compared with the same config decided exactly: what leases refuse\n"
    "  early, against the published bound. --spread: how requests reach the instances:\n"
    "  client (by client address, the default), request (each in turn: the worst case), or\n"
    "  log (the i-th LOG is instance i).\n"
    "  --overrides FILE: per-caller overrides as the admin API's GET /overrides lists them,\n"
    "  applied to every config all along (their expiry aside).\n";

}  // namespace

int replay_command(const std::vector<std::string_view>& args) {
  replay::Options o;
  o.progress = isatty(2) != 0;
  auto value = [&](std::size_t& i) -> std::optional<std::string> {
    if (i + 1 >= args.size()) return std::nullopt;
    return std::string(args[++i]);
  };
  for (std::size_t i = 1; i < args.size(); ++i) {
    auto a = args[i];
    std::optional<std::string> v;
    if (a == "--config" && (v = value(i))) {
      o.candidate_file = *v;
    } else if (a == "--baseline" && (v = value(i))) {
      o.baseline_file = *v;
    } else if (a == "--overrides" && (v = value(i))) {
      o.overrides_file = *v;
    } else if (a == "--html" && (v = value(i))) {
      o.html_file = *v;
    } else if (a == "--decisions" && (v = value(i))) {
      o.decisions_file = *v;
    } else if (a == "--top" && (v = value(i))) {
      try {
        o.top = static_cast<std::size_t>(std::stoul(*v));
      } catch (const std::exception&) {
        std::cerr << "floodgate replay: --top needs a number\n" << kReplayUsage;
        return 2;
      }
    } else if (a == "--instances" && (v = value(i))) {
      int n = 0;
      auto [end, ec] = std::from_chars(v->data(), v->data() + v->size(), n);
      if (ec != std::errc() || end != v->data() + v->size() || n < 1 || n > 10000) {
        std::cerr << "floodgate replay: --instances needs a number from 1 to 10000\n"
                  << kReplayUsage;
        return 2;
      }
      o.instances = static_cast<std::size_t>(n);
    } else if (a == "--spread" && (v = value(i))) {
      if (*v == "client") {
        o.spread = replay::Spread::client;
      } else if (*v == "request") {
        o.spread = replay::Spread::request;
      } else if (*v == "log") {
        o.spread = replay::Spread::log;
      } else {
        std::cerr << "floodgate replay: --spread is client, request or log, not " << *v << "\n"
                  << kReplayUsage;
        return 2;
      }
    } else if (a == "--lease") {
      o.lease = true;
    } else if (a == "--json") {
      o.json = true;
    } else if (a == "--quiet") {
      o.progress = false;
    } else if (a == "--progress") {
      o.progress = true;
    } else if (a == "-h" || a == "--help") {
      std::cout << kReplayUsage;
      return 0;
    } else if (a.size() > 1 && a.front() == '-' && a != "-") {
      std::cerr << "floodgate replay: unknown or incomplete option " << a << "\n" << kReplayUsage;
      return 2;
    } else {
      o.logs.emplace_back(a);
    }
  }
  if ((o.instances > 0 || o.spread != replay::Spread::client) && !o.lease) {
    std::cerr << "floodgate replay: --instances and --spread describe --lease's instances: add "
                 "--lease\n";
    return 2;
  }
  if (o.candidate_file.empty() || o.logs.empty()) {
    std::cerr << kReplayUsage;
    return 2;
  }
  return replay::run(o, std::cout, std::cerr);
}

}  // namespace floodgate::app
