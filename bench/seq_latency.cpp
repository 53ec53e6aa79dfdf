// seq_latency N PATH PORT...: one keep-alive HTTP/1.1 connection per port, N sequential GETs
// of PATH on each, taking the ports in turn (so that every target sees the same moments of
// the machine), and the latency percentiles per port. For bench/redis-latency.sh: the time a
// store decision adds to one request at low load, which throughput benchmarks cannot show.
#include <arpa/inet.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

namespace {

bool parse(std::string_view text, int& out) {
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc{} && p == text.data() + text.size();
}

int connect_to(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) return -1;
  int on = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
  return fd;
}

// One request and its whole response (Content-Length bodies: the test origin's). Its status,
// or -1.
int exchange(int fd, const std::string& request) {
  if (::write(fd, request.data(), request.size()) != static_cast<ssize_t>(request.size()))
    return -1;
  std::string in;
  char buf[16384];
  for (;;) {
    auto n = ::read(fd, buf, sizeof buf);
    if (n <= 0) return -1;
    in.append(buf, static_cast<std::size_t>(n));
    auto end = in.find("\r\n\r\n");
    if (end == std::string::npos) continue;
    std::size_t length = 0;
    std::string lower = in.substr(0, end);
    std::transform(lower.begin(), lower.end(), lower.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    if (auto at = lower.find("content-length:"); at != std::string::npos) {
      auto v = lower.substr(at + 15);
      v.erase(0, v.find_first_not_of(' '));
      std::from_chars(v.data(), v.data() + v.size(), length);
    }
    if (in.size() < end + 4 + length) continue;
    int status = -1;
    if (in.size() > 12) std::from_chars(in.data() + 9, in.data() + 12, status);
    return status;
  }
}

}  // namespace

int main(int argc, char** argv) {
  int n = 0;
  if (argc < 4 || !parse(argv[1], n) || n <= 0) {
    std::fprintf(stderr, "usage: seq_latency N PATH PORT...\n");
    return 2;
  }
  const std::string request = std::string("GET ") + argv[2] + " HTTP/1.1\r\nHost: bench\r\n\r\n";
  std::vector<int> ports, fds;
  for (int i = 3; i < argc; ++i) {
    int port = 0;
    if (!parse(argv[i], port)) return 2;
    int fd = connect_to(port);
    if (fd < 0) {
      std::fprintf(stderr, "seq_latency: cannot connect to %d\n", port);
      return 1;
    }
    ports.push_back(port);
    fds.push_back(fd);
  }
  std::vector<std::vector<double>> us(fds.size());
  for (int warm = 0; warm < 100; ++warm)
    for (int fd : fds) exchange(fd, request);
  for (int r = 0; r < n; ++r)
    for (std::size_t i = 0; i < fds.size(); ++i) {
      const auto start = std::chrono::steady_clock::now();
      if (exchange(fds[i], request) != 200) {
        std::fprintf(stderr, "seq_latency: port %d did not answer 200\n", ports[i]);
        return 1;
      }
      us[i].push_back(
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
              .count());
    }
  for (std::size_t i = 0; i < fds.size(); ++i) {
    auto& v = us[i];
    std::sort(v.begin(), v.end());
    auto q = [&](double p) {
      return v[std::min(v.size() - 1, static_cast<std::size_t>(p * v.size()))];
    };
    std::printf("%d\t%.1f\t%.1f\t%.1f\n", ports[i], q(0.5), q(0.9), q(0.99));
    ::close(fds[i]);
  }
}
