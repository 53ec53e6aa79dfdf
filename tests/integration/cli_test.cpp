// The real binary: --check-config on every shipped config, error reporting, and a run that
// serves, reloads on SIGHUP and exits cleanly on SIGTERM.
#include <gtest/gtest.h>
#include <signal.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <thread>

#include "floodgate_process.hpp"
#include "harness.hpp"

namespace floodgate::testing {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr
};

CommandResult run(const std::string& args) {
  CommandResult r;
  std::string cmd = std::string(FLOODGATE_BINARY) + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  char buf[4096];
  while (auto n = fread(buf, 1, sizeof buf, p)) r.output.append(buf, n);
  int status = pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

fs::path temp_file(const std::string& name, const std::string& text) {
  auto dir = fs::temp_directory_path() / ("floodgate-cli-" + std::to_string(getpid()));
  fs::create_directories(dir);
  auto path = dir / name;
  std::ofstream(path) << text;
  return path;
}

std::uint16_t free_port() {
  asio::io_context ioc;
  tcp::acceptor a(ioc, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  return a.local_endpoint().port();
}

TEST(Cli, VersionPrintsTheVersion) {
  auto r = run("--version");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_TRUE(std::regex_search(r.output, std::regex(R"(^floodgate \d+\.\d+\.\d+)"))) << r.output;
}

TEST(Cli, EveryShippedConfigPassesCheckConfig) {
  std::vector<fs::path> files;
  for (auto dir : {"config", "config/examples"}) {
    auto full = fs::path(FLOODGATE_SOURCE_DIR) / dir;
    if (!fs::exists(full)) continue;
    for (const auto& e : fs::directory_iterator(full))
      if (e.path().extension() == ".yaml") files.push_back(e.path());
  }
  ASSERT_FALSE(files.empty());
  for (const auto& f : files) {
    auto r = run("--check-config " + f.string());
    EXPECT_EQ(r.exit_code, 0) << f << "\n" << r.output;
    EXPECT_NE(r.output.find(": OK"), std::string::npos) << r.output;
  }
}

TEST(Cli, CheckConfigReportsEveryErrorWithLineAndColumn) {
  auto path = temp_file("three-errors.yaml", R"(server:
  listen: [127.0.0.1:8080]
  lisen: 1
upstreams:
  origin: { url: "http://127.0.0.1:9000", connect_timeout: 5 }
routes:
  - name: r
    match: { path_prefix: / }
    upstream: orgin
)");
  auto r = run("--check-config " + path.string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  std::string p = path.string();
  EXPECT_NE(r.output.find(p + ":3:3: unknown key \"lisen\" in server (did you mean \"listen\"?)"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find(p + ":5:60: upstreams.origin.connect_timeout: expected a duration"),
            std::string::npos)
      << r.output;
  EXPECT_NE(
      r.output.find(
          p + ":9:15: routes[0].upstream: no upstream named \"orgin\" (did you mean \"origin\"?)"),
      std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("3 errors"), std::string::npos) << r.output;
}

TEST(Cli, MissingFileIsAnError) {
  auto r = run("--check-config /nonexistent/floodgate.yaml");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("/nonexistent/floodgate.yaml:0:0: cannot read the file"),
            std::string::npos);
}

TEST(Cli, UnknownArgumentsPrintUsage) {
  auto r = run("--frobnicate");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("usage:"), std::string::npos);
}

std::string serving_config(std::uint16_t port, std::uint16_t origin, const std::string& prefix) {
  return "server:\n  listen: [127.0.0.1:" + std::to_string(port) +
         "]\n  threads: 2\n  timeouts: { drain: 2s }\nupstreams:\n  origin: { url: "
         "\"http://127.0.0.1:" +
         std::to_string(origin) +
         "\" }\nroutes:\n  - name: r\n    match: { path_prefix: " + prefix +
         " }\n    upstream: origin\n";
}

std::optional<Response> get_when_up(std::uint16_t port, const std::string& target) {
  for (int i = 0; i < 100; ++i) {
    try {
      return get(port, target);
    } catch (const std::exception&) {
      std::this_thread::sleep_for(50ms);
    }
  }
  return std::nullopt;
}

TEST(Cli, ServesReloadsOnSighupAndExitsCleanlyOnSigterm) {
  Origin origin;
  auto port = free_port();
  auto path = temp_file("serve.yaml", serving_config(port, origin.port(), "/a"));
  auto fg = start_floodgate(path.string());
  auto r = get_when_up(port, "/a/1");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->result_int(), 200);
  EXPECT_EQ(get(port, "/b/1")->result_int(), 404);

  // A bad file is rejected, naming itself, and the old config keeps serving.
  std::ofstream(path) << "server: [oops\n";
  kill(fg->pid(), SIGHUP);
  std::string log;
  const auto rejected = wait_for_line(*fg, "reload rejected", 5s, log);
  EXPECT_NE(rejected.find(path.string() + ":"), std::string::npos) << log;
  EXPECT_NE(wait_for_line(*fg, "the previous config keeps serving", 5s, log), "") << log;
  EXPECT_EQ(get(port, "/a/2")->result_int(), 200);

  // A good file takes effect.
  std::ofstream(path) << serving_config(port, origin.port(), "/b");
  kill(fg->pid(), SIGHUP);
  bool switched = false;
  for (int i = 0; i < 40 && !switched; ++i) {
    std::this_thread::sleep_for(50ms);
    switched = get(port, "/b/2")->result_int() == 200;
  }
  EXPECT_TRUE(switched);
  EXPECT_EQ(get(port, "/a/3")->result_int(), 404);

  auto code = fg->signal_and_wait(SIGTERM, 5s);
  ASSERT_TRUE(code);
  EXPECT_EQ(*code, 0);
  EXPECT_EQ(origin.requests(), 3u);
}

// What a reload cannot change still runs as the process started: /config says so, and each
// reload's log compares the new file with what runs, not with the previous file.
TEST(Cli, AReloadReportsTheThreadsThatRun) {
  Origin origin;
  const auto port = free_port(), admin = free_port();
  auto config = [&](int threads) {
    return "server:\n  listen: [127.0.0.1:" + std::to_string(port) +
           "]\n  threads: " + std::to_string(threads) +
           "\nadmin: { listen: \"127.0.0.1:" + std::to_string(admin) +
           "\" }\nupstreams:\n  origin: { url: \"http://127.0.0.1:" +
           std::to_string(origin.port()) +
           "\" }\nroutes:\n  - name: r\n    match: { path_prefix: / }\n    upstream: origin\n";
  };
  auto path = temp_file("threads.yaml", config(1));
  auto fg = start_floodgate(path.string());
  ASSERT_TRUE(get_when_up(port, "/"));
  auto threads_in_config = [&] {
    auto r = get_when_up(admin, "/config");
    if (!r) return std::string("(no answer)");
    const auto& body = r->body();
    const auto at = body.find("\"threads\":");
    return at == std::string::npos ? body : body.substr(at + 10, 1);
  };
  EXPECT_EQ(threads_in_config(), "1");
  std::string log;
  // threads: 3 needs a restart: the log says 1 still runs, and so does /config.
  std::ofstream(path) << config(3);
  kill(fg->pid(), SIGHUP);
  const auto line = wait_for_line(*fg, "server.threads", 5s, log);
  EXPECT_NE(line.find("server.threads: 3 (was 1) takes effect only after a restart; still 1"),
            std::string::npos)
      << log;
  EXPECT_NE(wait_for_line(*fg, "is now serving", 5s, log), "") << log;
  EXPECT_EQ(threads_in_config(), "1");
  // Back to 1: that is what runs, so nothing needs a restart.
  std::ofstream(path) << config(1);
  kill(fg->pid(), SIGHUP);
  std::string second;
  EXPECT_NE(wait_for_line(*fg, "is now serving", 5s, second), "") << second;
  EXPECT_EQ(second.find("server.threads"), std::string::npos) << second;
  EXPECT_EQ(threads_in_config(), "1");
  auto code = fg->signal_and_wait(SIGTERM, 5s);
  ASSERT_TRUE(code);
  EXPECT_EQ(*code, 0);
}

// log.access_log: { path }: the lines go to the file, not stdout; after logrotate moves it
// away, SIGUSR1 makes a new file at the path and the old one keeps what it had.
TEST(Cli, TheAccessLogGoesToItsFileAndSigusr1ReopensIt) {
  Origin origin;
  const auto port = free_port();
  const auto dir = fs::temp_directory_path() / ("fg-access-" + std::to_string(getpid()));
  fs::create_directories(dir);
  const auto file = dir / "access.log";
  auto path = temp_file(
      "access-file.yaml",
      "server:\n  listen: [127.0.0.1:" + std::to_string(port) +
          "]\n  threads: 2\nlog: { access_log: { path: " + file.string() +
          " } }\nupstreams:\n  origin: { url: \"http://127.0.0.1:" + std::to_string(origin.port()) +
          "\" }\nroutes:\n  - name: r\n    match: { path_prefix: / }\n    "
          "upstream: origin\n");
  auto fg = start_floodgate(path.string());
  ASSERT_TRUE(get_when_up(port, "/before"));
  auto lines_of = [](const fs::path& f) {
    std::ifstream in(f);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    return text;
  };
  EXPECT_TRUE(eventually(
      [&] { return lines_of(file).find("\"path\":\"/before\"") != std::string::npos; }, 5s))
      << lines_of(file);
  fs::rename(file, dir / "access.log.1");  // what logrotate does
  kill(fg->pid(), SIGUSR1);
  std::string log;
  EXPECT_NE(wait_for_line(*fg, "reopened", 5s, log), "") << log;
  ASSERT_TRUE(get(port, "/after"));
  EXPECT_TRUE(eventually(
      [&] { return lines_of(file).find("\"path\":\"/after\"") != std::string::npos; }, 5s))
      << lines_of(file);
  const auto rotated = lines_of(dir / "access.log.1");
  EXPECT_NE(rotated.find("\"path\":\"/before\""), std::string::npos) << rotated;
  EXPECT_EQ(rotated.find("\"path\":\"/after\""), std::string::npos) << rotated;
  // Nothing went to stdout: every line the process printed is its own log (stderr).
  auto code = fg->signal_and_wait(SIGTERM, 5s);
  ASSERT_TRUE(code);
  EXPECT_EQ(*code, 0);
  std::string rest;
  for (std::string l = fg->read_line(200ms); !l.empty(); l = fg->read_line(200ms)) rest += l + "\n";
  EXPECT_EQ((log + rest).find("\"type\":\"access\""), std::string::npos) << log << rest;
  fs::remove_all(dir);
}

// An access log file that cannot be opened stops the start with the reason.
TEST(Cli, AnAccessLogThatCannotBeOpenedStopsTheStart) {
  auto path = temp_file("access-bad.yaml",
                        "server:\n  listen: [127.0.0.1:0]\nlog: { access_log: { path: "
                        "/nonexistent-dir/access.log } }\nupstreams:\n  o: { url: "
                        "\"http://127.0.0.1:9\" }\nroutes:\n  - { name: r, match: { path_prefix: "
                        "/ }, upstream: o }\n");
  auto fg = start_floodgate(path.string());
  std::string log;
  EXPECT_NE(wait_for_line(*fg, "cannot open the access log /nonexistent-dir/access.log", 5s, log),
            "")
      << log;
  auto code = fg->signal_and_wait(0, 5s);
  ASSERT_TRUE(code);
  EXPECT_EQ(*code, 1);
}

// The container's HEALTHCHECK (the image has no curl): 0 for a 200 from /healthz, 1 with the
// reason for a closed port or a listener that never answers, 2 for an address it cannot read.
TEST(Cli, HealthcheckAsksTheAdminListener) {
  Origin origin;
  auto port = free_port();
  auto admin = free_port();
  auto path =
      temp_file("health.yaml", serving_config(port, origin.port(), "/a") +
                                   "admin: { listen: 127.0.0.1:" + std::to_string(admin) + " }\n");
  ChildProcess fg({FLOODGATE_BINARY, "--config", path.string()});
  ASSERT_TRUE(get_when_up(port, "/a/1"));
  auto address = "127.0.0.1:" + std::to_string(admin);

  auto up = run("healthcheck " + address);
  EXPECT_EQ(up.exit_code, 0) << up.output;
  EXPECT_NE(up.output.find("/healthz: HTTP/1.1 200"), std::string::npos) << up.output;

  // The address may come from the environment, as in the image.
  setenv("FLOODGATE_ADMIN_HEALTH", address.c_str(), 1);
  auto from_env = run("healthcheck");
  unsetenv("FLOODGATE_ADMIN_HEALTH");
  EXPECT_EQ(from_env.exit_code, 0) << from_env.output;

  auto closed = run("healthcheck 127.0.0.1:" + std::to_string(free_port()));
  EXPECT_EQ(closed.exit_code, 1) << closed.output;
  EXPECT_NE(closed.output.find("cannot connect"), std::string::npos) << closed.output;

  // The kernel completes the connection from the backlog; nobody ever answers.
  asio::io_context ioc;
  tcp::acceptor silent(ioc, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  auto hung = run("healthcheck 127.0.0.1:" + std::to_string(silent.local_endpoint().port()));
  EXPECT_EQ(hung.exit_code, 1) << hung.output;
  EXPECT_NE(hung.output.find("did not answer within 2 s"), std::string::npos) << hung.output;

  auto bad = run("healthcheck nonsense");
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_NE(bad.output.find("is not HOST:PORT"), std::string::npos) << bad.output;

  auto code = fg.signal_and_wait(SIGTERM, 5s);
  ASSERT_TRUE(code);
  EXPECT_EQ(*code, 0);
}

}  // namespace
}  // namespace floodgate::testing
