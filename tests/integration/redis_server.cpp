#include "redis_server.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <thread>

namespace floodgate::testing {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

std::uint16_t free_port() {
  asio::io_context ioc;
  tcp::acceptor a(ioc, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  return a.local_endpoint().port();
}

RedisServer::RedisServer() {
  static int counter = 0;
  dir_ = fs::temp_directory_path() /
         ("floodgate-redis-" + std::to_string(getpid()) + "-" + std::to_string(++counter));
  fs::create_directories(dir_);
  port_ = free_port();
  start();
}

RedisServer::~RedisServer() {
  if (process_) thaw();
  process_.reset();
  std::error_code ignored;
  fs::remove_all(dir_, ignored);
}

void RedisServer::start() {
  process_ = std::make_unique<ChildProcess>(std::vector<std::string>{
      "/usr/bin/redis-server", "--port", std::to_string(port_), "--bind", "127.0.0.1", "--save", "",
      "--appendonly", "no", "--dir", dir_.string(), "--logfile", (dir_ / "redis.log").string()});
  for (int i = 0; i < 200; ++i) {
    if (cli("PING") == "PONG") return;
    std::this_thread::sleep_for(20ms);
  }
  throw std::runtime_error("redis-server did not start on port " + std::to_string(port_));
}

void RedisServer::kill() {
  if (!process_) return;
  ::kill(process_->pid(), SIGCONT);
  process_->signal_and_wait(SIGKILL, 5s);
  process_.reset();
}

void RedisServer::freeze() {
  if (process_) ::kill(process_->pid(), SIGSTOP);
}

void RedisServer::thaw() {
  if (process_) ::kill(process_->pid(), SIGCONT);
}

void RedisServer::restart() {
  kill();
  start();
}

std::string redis_cli(std::uint16_t port, const std::string& args, int timeout_seconds) {
  return command_output("redis-cli -p " + std::to_string(port) + " " + args, timeout_seconds);
}

}  // namespace floodgate::testing
