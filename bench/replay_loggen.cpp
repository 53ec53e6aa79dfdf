// Writes a synthetic day of access log to stdout for bench/replay.sh: floodgate JSON lines
// (with replay fields: ip, host, header:x-api-key) or nginx `combined`.
//
//   replay_loggen [--requests N] [--days D] [--format json|nginx] [--seed S] [--start 2026-11-29]
//
// --requests is the total; with --days each day gets an equal share of it.
//
// The day: a diurnal request rate (a quiet night, a midday peak), callers drawn from a
// Zipf-like distribution over 100,000 addresses and 5,000 API keys, plus three characters a
// limit change should find: an enterprise NAT gateway at a steady 1,800 requests a minute
// during office hours, a scraper bursting 200 requests a second for ten minutes at 14:00, and
// a login brute-forcer hitting POST /login all night.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "floodgate/limit/utc_time.hpp"

namespace {

using floodgate::limit::Micros;
constexpr Micros kSecond = 1'000'000;
constexpr Micros kDay = 86'400 * kSecond;

// Zipf-like ranks by inverse transform of a power law: cheap and skewed enough.
std::size_t zipf(std::mt19937_64& rng, std::size_t n, double s) {
  std::uniform_real_distribution<double> u(0.0, 1.0);
  double x = std::pow(u(rng), s);  // s > 1 bunches towards 0
  return std::min(n - 1, static_cast<std::size_t>(x * static_cast<double>(n)));
}

std::string address(std::size_t i) {
  return "10." + std::to_string(i / 65536 % 256) + "." + std::to_string(i / 256 % 256) + "." +
         std::to_string(i % 256);
}

struct Request {
  Micros at;
  std::string ip;
  std::string method;
  std::string path;
  std::string key;  // x-api-key, may be empty
};

class Writer {
 public:
  explicit Writer(bool json) : json_(json) { buf_.reserve(1 << 20); }
  ~Writer() { flush(); }
  void write(const Request& r) {
    char line[512];
    int n;
    if (json_) {
      std::string ts = floodgate::limit::format_utc(r.at);
      n = std::snprintf(line, sizeof line,
                        "{\"type\":\"access\",\"ts\":\"%s\",\"pop\":\"fra1\",\"peer\":\"10.0.0.1\","
                        "\"method\":\"%s\",\"path\":\"%s\",\"route\":\"-\",\"status\":200,"
                        "\"duration_ms\":%.3f,\"upstream_ms\":1.000,\"fields\":{\"ip\":\"%s\","
                        "\"host\":\"shop.example\"%s%s%s}}\n",
                        ts.c_str(), r.method.c_str(), r.path.c_str(), 2.0 + (r.at % 997) / 100.0,
                        r.ip.c_str(), r.key.empty() ? "" : ",\"header:x-api-key\":\"",
                        r.key.c_str(), r.key.empty() ? "" : "\"");
    } else {
      static const char* months[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                     "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
      std::string ts = floodgate::limit::format_utc(r.at);  // 2026-11-29T14:00:00.000000Z
      int mo = std::atoi(ts.substr(5, 2).c_str());
      n = std::snprintf(line, sizeof line,
                        "%s - - [%s/%s/%s:%s +0000] \"%s %s HTTP/1.1\" 200 612 \"-\" "
                        "\"bench-client/1.0\"\n",
                        r.ip.c_str(), ts.substr(8, 2).c_str(), months[mo - 1],
                        ts.substr(0, 4).c_str(), ts.substr(11, 8).c_str(), r.method.c_str(),
                        r.path.c_str());
    }
    buf_.append(line, static_cast<std::size_t>(n));
    if (buf_.size() > (1 << 20) - 1024) flush();
  }

 private:
  void flush() {
    std::fwrite(buf_.data(), 1, buf_.size(), stdout);
    buf_.clear();
  }
  bool json_;
  std::string buf_;
};

// The background's rate over the day: 0.2 at 04:00, 1.8 at 14:00 (mean 1).
double weight(Micros t) {
  double hours = static_cast<double>(t % kDay) / 3600e6;
  return 1.0 - 0.8 * std::cos((hours - 2.0) / 24.0 * 2.0 * M_PI);
}

// One day from `day0`: `total` requests, the background and the three characters merged by
// time.
void generate_day(Micros day0, std::uint64_t total, std::mt19937_64& rng, Writer& out) {
  struct Stream {
    Micros next, end, step;
    std::string ip, method, path, key;
  };
  std::vector<Stream> streams = {
      {day0 + 9 * 3600 * kSecond, day0 + 17 * 3600 * kSecond, kSecond / 30, "203.0.113.10", "GET",
       "/api/orders", "key-enterprise"},
      {day0 + 14 * 3600 * kSecond, day0 + (14 * 3600 + 600) * kSecond, kSecond / 200, "192.0.2.66",
       "GET", "/products/", ""},
      {day0 + 0 * kSecond, day0 + 6 * 3600 * kSecond, kSecond / 3, "192.0.2.99", "POST", "/login",
       ""},
  };
  std::uint64_t special = 0;
  for (const auto& s : streams) special += static_cast<std::uint64_t>((s.end - s.next) / s.step);
  const std::uint64_t background = total > special ? total - special : 0;
  std::exponential_distribution<double> gap(1.0);
  const double mean_gap =
      static_cast<double>(kDay) / static_cast<double>(std::max<std::uint64_t>(1, background));
  Micros t = day0;
  std::uint64_t written = 0;
  static const char* pages[] = {"/", "/products/", "/products/42", "/cart", "/search"};
  while (written < total) {
    // Thinning: a Poisson stream whose rate follows the day's curve.
    t += static_cast<Micros>(gap(rng) * mean_gap / weight(t));
    for (;;) {  // the streams' events up to t, earliest first
      Stream* first = nullptr;
      for (auto& s : streams)
        if (s.next < s.end && s.next <= t && (!first || s.next < first->next)) first = &s;
      if (!first || written >= total) break;
      Request r{first->next, first->ip, first->method, first->path, first->key};
      if (first->path == "/products/") r.path += std::to_string(first->next % 5000);
      out.write(r);
      first->next += first->step;
      ++written;
    }
    if (written >= total) break;
    Request r;
    r.at = t;
    r.ip = address(zipf(rng, 100'000, 3.0));
    std::uniform_int_distribution<int> kind(0, 9);
    int k = kind(rng);
    if (k < 4) {
      r.method = "GET";
      r.path = "/api/items";
      r.key = "key-" + std::to_string(zipf(rng, 5'000, 2.5));
    } else if (k == 4) {
      r.method = "POST";
      r.path = "/login";
    } else {
      r.method = "GET";
      r.path = pages[k % 5];
    }
    out.write(r);
    ++written;
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::uint64_t total = 1'000'000;
  std::uint64_t days = 1;
  bool json = true;
  std::uint64_t seed = 7;
  std::string start = "2026-11-29";
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i], v = argv[i + 1];
    if (a == "--requests")
      total = std::strtoull(v.c_str(), nullptr, 10);
    else if (a == "--days")
      days = std::max<std::uint64_t>(1, std::strtoull(v.c_str(), nullptr, 10));
    else if (a == "--format")
      json = v != "nginx";
    else if (a == "--seed")
      seed = std::strtoull(v.c_str(), nullptr, 10);
    else if (a == "--start")
      start = v;
    else {
      std::fprintf(stderr,
                   "usage: replay_loggen [--requests N] [--days D] [--format json|nginx] "
                   "[--seed S] [--start YYYY-MM-DD]\n");
      return 2;
    }
  }
  Micros day0 = 0;
  if (!floodgate::limit::parse_utc(start + "T00:00:00Z", day0)) {
    std::fprintf(stderr, "replay_loggen: --start wants YYYY-MM-DD\n");
    return 2;
  }
  std::mt19937_64 rng(seed);
  Writer out(json);
  for (std::uint64_t d = 0; d < days; ++d)
    generate_day(day0 + static_cast<Micros>(d) * kDay, total / days, rng, out);
  return 0;
}
