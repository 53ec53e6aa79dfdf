// floodgate-delay-proxy TARGET_PORT ONE_WAY_MICROSECONDS: the tests' DelayProxy as a process,
// for bench/far-store.sh. Prints the port it listens on (127.0.0.1), then relays until SIGINT
// or SIGTERM.
#include <charconv>
#include <csignal>
#include <cstdio>
#include <string_view>

#include "delay_proxy.hpp"

namespace {

template <typename T>
bool parse(std::string_view text, T& out) {
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc{} && p == text.data() + text.size();
}

}  // namespace

int main(int argc, char** argv) {
  std::uint16_t target = 0;
  long long one_way = 0;
  if (argc != 3 || !parse(argv[1], target) || !parse(argv[2], one_way) || one_way < 0) {
    std::fprintf(stderr, "usage: floodgate-delay-proxy TARGET_PORT ONE_WAY_MICROSECONDS\n");
    return 2;
  }
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);  // the relay's thread inherits the mask
  floodgate::testing::DelayProxy relay(target, std::chrono::microseconds(one_way));
  std::printf("%u\n", relay.port());
  std::fflush(stdout);
  int signal = 0;
  sigwait(&stop, &signal);
  return 0;
}
