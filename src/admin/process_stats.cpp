#include "process_stats.hpp"

#include <sys/resource.h>
#include <unistd.h>

#include <charconv>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace floodgate::admin {

namespace {

std::string read_all(const char* path) {
  std::ifstream in(path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The space-separated fields of /proc/self/stat after the command's closing parenthesis (the
// command may hold spaces and parentheses itself): [0] is field 3, the state.
std::vector<std::string_view> stat_fields(std::string_view stat) {
  std::vector<std::string_view> out;
  auto close = stat.rfind(')');
  if (close == std::string_view::npos) return out;
  stat.remove_prefix(close + 1);
  while (!stat.empty()) {
    while (!stat.empty() && stat.front() == ' ') stat.remove_prefix(1);
    auto end = stat.find_first_of(" \n");
    if (end == std::string_view::npos) end = stat.size();
    if (end > 0) out.push_back(stat.substr(0, end));
    stat.remove_prefix(end);
    if (!stat.empty() && stat.front() == '\n') break;
  }
  return out;
}

std::optional<std::uint64_t> number(std::string_view s) {
  std::uint64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

// The boot time, from /proc/stat's "btime" line.
std::optional<std::uint64_t> boot_time() {
  std::istringstream in(read_all("/proc/stat"));
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("btime ", 0) == 0) return number(std::string_view(line).substr(6));
  return std::nullopt;
}

}  // namespace

std::optional<ProcessStats> read_process_stats() {
  const auto stat = read_all("/proc/self/stat");
  const auto f = stat_fields(stat);
  // Fields 14, 15 (utime, stime), 22 (starttime), 23 (vsize), 24 (rss): 3 is f[0].
  if (f.size() < 22) return std::nullopt;
  const auto utime = number(f[11]), stime = number(f[12]), start = number(f[19]),
             vsize = number(f[20]), rss = number(f[21]);
  const auto btime = boot_time();
  const long ticks = ::sysconf(_SC_CLK_TCK);
  const long page = ::sysconf(_SC_PAGESIZE);
  if (!utime || !stime || !start || !vsize || !rss || !btime || ticks <= 0 || page <= 0)
    return std::nullopt;
  ProcessStats p;
  p.cpu_seconds = static_cast<double>(*utime + *stime) / static_cast<double>(ticks);
  p.start_time_seconds =
      static_cast<double>(*btime) + static_cast<double>(*start) / static_cast<double>(ticks);
  p.virtual_bytes = *vsize;
  p.resident_bytes = *rss * static_cast<std::uint64_t>(page);
  std::error_code ec;
  for (std::filesystem::directory_iterator it("/proc/self/fd", ec), end; !ec && it != end;
       it.increment(ec))
    ++p.open_fds;
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) == 0) p.max_fds = limit.rlim_cur;
  return p;
}

}  // namespace floodgate::admin
