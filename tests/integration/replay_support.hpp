#pragma once
// Helpers for the `floodgate replay` tests: a scratch directory, the real binary run with
// its stdout and stderr kept apart, access log lines written by hand, and the --decisions
// file read back.

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/json.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

extern char** environ;

namespace floodgate::testing::replay_support {

namespace fs = std::filesystem;

// A fresh directory, removed with everything in it at the end of the test.
class ScratchDir {
 public:
  ScratchDir() {
    std::string tmpl = (fs::temp_directory_path() / "floodgate-replay-XXXXXX").string();
    if (!mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~ScratchDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  std::string operator/(const std::string& name) const { return (path_ / name).string(); }
  std::string write(const std::string& name, const std::string& text) const {
    auto p = *this / name;
    std::ofstream(p, std::ios::binary) << text;
    return p;
  }

 private:
  fs::path path_;
};

inline std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

struct Run {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// Runs the floodgate binary with `args` (no shell), stdout and stderr captured apart, stdin
// read from `input`.
inline Run floodgate(const std::vector<std::string>& args, const ScratchDir& dir,
                     const std::string& input = "/dev/null") {
  const auto out_path = dir / "stdout.txt", err_path = dir / "stderr.txt";
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, input.c_str(), O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, out_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, err_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  std::vector<std::string> argv = {FLOODGATE_BINARY};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<char*> raw;
  for (auto& a : argv) raw.push_back(a.data());
  raw.push_back(nullptr);
  pid_t pid = -1;
  Run r;
  int rc = posix_spawn(&pid, raw[0], &actions, nullptr, raw.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) throw std::runtime_error("cannot start " + argv[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = read_text(out_path);
  r.err = read_text(err_path);
  return r;
}

// `floodgate replay --quiet ARGS...`.
inline Run replay(std::vector<std::string> args, const ScratchDir& dir,
                  const std::string& input = "/dev/null") {
  args.insert(args.begin(), {"replay", "--quiet"});
  return floodgate(args, dir, input);
}

// "2026-11-30T05:MM:SS.ffffffZ" for `micros` after 05:00:00 on that day (under an hour).
inline std::string ts(long long micros) {
  char buf[96];
  std::snprintf(buf, sizeof buf, "2026-11-30T05:%02lld:%02lld.%06lldZ", micros / 60'000'000,
                micros / 1'000'000 % 60, micros % 1'000'000);
  return buf;
}
inline long long at(int minute, int second, int micros = 0) {
  return (minute * 60LL + second) * 1'000'000 + micros;
}

// One of floodgate's access log lines, as a replay reads it; `fields` is the JSON object's
// contents, e.g. "\"ip\":\"10.0.0.1\"".
inline std::string access_line(long long micros, const std::string& path, const std::string& fields,
                               const std::string& method = "GET", const std::string& decision = "",
                               int status = 0) {
  if (status == 0) status = decision == "limited" ? 429 : 200;
  std::string line = "{\"type\":\"access\",\"ts\":\"" + ts(micros) +
                     "\",\"pop\":\"test\",\"peer\":\"127.0.0.1\",\"method\":\"" + method +
                     "\",\"path\":\"" + path +
                     "\",\"route\":\"r\",\"status\":" + std::to_string(status);
  if (!decision.empty()) line += ",\"decision\":\"" + decision + "\",\"limit\":\"l\",\"key\":\"k\"";
  line += ",\"duration_ms\":0.250,\"upstream_ms\":0.200,\"fields\":{" + fields + "}}";
  return line;
}
inline std::string ip_field(const std::string& ip) {
  return "\"ip\":\"" + ip + "\"";
}

// One line of --decisions: time, method, path, then route, verdict, limit per config.
struct DecisionLine {
  std::string time, method, path;
  std::vector<std::string> columns;  // route, verdict, limit (then the baseline's)
  const std::string& route(std::size_t config = 0) const { return columns.at(config * 3); }
  const std::string& verdict(std::size_t config = 0) const { return columns.at(config * 3 + 1); }
  const std::string& limit(std::size_t config = 0) const { return columns.at(config * 3 + 2); }
};

inline std::vector<DecisionLine> read_decisions(const std::string& path) {
  std::vector<DecisionLine> out;
  std::istringstream in(read_text(path));
  std::string line;
  while (std::getline(in, line)) {
    std::vector<std::string> cells;
    std::size_t start = 0;
    for (;;) {
      auto tab = line.find('\t', start);
      cells.push_back(line.substr(start, tab == std::string::npos ? tab : tab - start));
      if (tab == std::string::npos) break;
      start = tab + 1;
    }
    if (cells.size() < 6 || cells.size() % 3 != 0)
      throw std::runtime_error("malformed decisions line: " + line);
    out.push_back({cells[0], cells[1], cells[2], {cells.begin() + 3, cells.end()}});
  }
  return out;
}

inline boost::json::object parse_report(const std::string& text) {
  return boost::json::parse(text).as_object();
}

// The report's entry for route/limit under `config` ("candidate" or "baseline").
inline const boost::json::object& limit_entry(const boost::json::object& report,
                                              const std::string& route, const std::string& limit,
                                              const std::string& config = "candidate") {
  for (const auto& l : report.at(config).at("limits").as_array()) {
    const auto& o = l.as_object();
    if (o.at("route").as_string() == route && o.at("limit").as_string() == limit) return o;
  }
  throw std::runtime_error("no limit " + route + "/" + limit + " in the report");
}

// (Not of a temporary report: the entry would dangle.)
const boost::json::object& limit_entry(boost::json::object&& report, const std::string& route,
                                       const std::string& limit,
                                       const std::string& config = "candidate") = delete;

inline std::int64_t number(const boost::json::value& v) {
  return v.to_number<std::int64_t>();
}

}  // namespace floodgate::testing::replay_support
