#include "log_reader.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cstring>

namespace floodgate::replay {

namespace {
constexpr std::size_t kReadSize = 1 << 17;
constexpr std::size_t kMaxLine = 1 << 20;  // longer lines are counted bad, not kept
}  // namespace

// One input: bytes -> lines -> parsed entries, in the file's own order.
class LogReader::File {
 public:
  File(LogReader& owner, std::string name, gzFile gz, std::uint64_t size)
      : owner_(owner), name_(std::move(name)), gz_(gz), size_(size) {
    buf_.resize(kReadSize);
  }
  ~File() {
    if (gz_) gzclose(gz_);
  }

  // The file's next request (parsed), or null at its end.
  Entry* front() {
    while (ready_.empty() && !done_) fill();
    return ready_.empty() ? nullptr : ready_.front().get();
  }
  std::unique_ptr<Entry> pop() {
    auto e = std::move(ready_.front());
    ready_.pop_front();
    return e;
  }
  std::uint64_t consumed() const { return gz_ ? static_cast<std::uint64_t>(gzoffset(gz_)) : size_; }
  std::uint64_t size() const { return size_; }

 private:
  // Reads one line (without its newline) into `out`; false at the end of the file.
  bool read_line(std::string& out, bool& too_long) {
    out.clear();
    too_long = false;
    for (;;) {
      if (begin_ < end_) {
        const char* start = buf_.data() + begin_;
        const char* nl = static_cast<const char*>(std::memchr(start, '\n', end_ - begin_));
        std::size_t n = nl ? static_cast<std::size_t>(nl - start) : end_ - begin_;
        if (out.size() + n <= kMaxLine)
          out.append(start, n);
        else
          too_long = true;
        begin_ += n + (nl ? 1 : 0);
        if (nl) {
          if (!out.empty() && out.back() == '\r') out.pop_back();
          return true;
        }
      }
      if (eof_) return !out.empty() || too_long;
      int n = gzread(gz_, buf_.data(), static_cast<unsigned>(buf_.size()));
      if (n < 0) {
        int code = 0;
        owner_.read_errors_.push_back(name_ + ": " + gzerror(gz_, &code));
        eof_ = true;
      } else if (n == 0) {
        // A cut-off gzip reads as a plain end of file; only gzerror tells them apart.
        int code = Z_OK;
        const char* why = gzerror(gz_, &code);
        if (code != Z_OK && code != Z_STREAM_END)
          owner_.read_errors_.push_back(name_ + ": " + (why && *why ? why : "read error"));
        eof_ = true;
      }
      begin_ = 0;
      end_ = n > 0 ? static_cast<std::size_t>(n) : 0;
    }
  }

  void fill() {
    auto e = owner_.fresh_entry();
    bool too_long = false;
    if (!read_line(e->line, too_long)) {
      owner_.recycle(std::move(e));
      flush_second();
      done_ = true;
      return;
    }
    ++line_no_;
    auto& c = owner_.counts_;
    ++c.lines;
    ParseResult r;
    bool nginx = false;
    if (too_long) {
      r = {LineKind::bad, "line longer than 1 MiB"};
    } else {
      std::string_view line = e->line;
      while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) line.remove_prefix(1);
      if (line.empty()) {
        r = {LineKind::skipped, "empty line"};
      } else if (line.front() == '{') {
        ++c.json_lines;
        r = parse_access_json(line, e->record, e->scratch);
      } else {
        ++c.nginx_lines;
        nginx = true;
        r = parse_nginx_combined(line, e->record);
      }
    }
    if (r.kind != LineKind::request) {
      if (r.kind == LineKind::bad) {
        ++c.bad;
        std::string why(r.why);
        if (c.bad_reasons[why]++ == 0) c.first_bad[why] = name_ + ":" + std::to_string(line_no_);
      } else {
        ++c.skipped;
      }
      owner_.recycle(std::move(e));
      return;
    }
    ++c.requests;
    if (nginx) {
      if (!second_.empty() && second_.front()->record.at != e->record.at) flush_second();
      second_.push_back(std::move(e));
    } else {
      flush_second();
      ready_.push_back(std::move(e));
    }
  }

  // nginx logs whole seconds: the i-th of a second's n requests is placed at i/n seconds.
  void flush_second() {
    const auto n = static_cast<limit::Micros>(second_.size());
    for (limit::Micros i = 0; i < n; ++i) {
      auto& e = second_[static_cast<std::size_t>(i)];
      e->record.at += i * limit::kMicrosPerSecond / n;
      ready_.push_back(std::move(e));
    }
    second_.clear();
  }

  LogReader& owner_;
  std::string name_;
  gzFile gz_ = nullptr;
  std::uint64_t size_ = 0;
  std::vector<char> buf_;
  std::size_t begin_ = 0, end_ = 0;
  bool eof_ = false, done_ = false;
  std::uint64_t line_no_ = 0;
  std::deque<std::unique_ptr<Entry>> ready_;
  std::vector<std::unique_ptr<Entry>> second_;
};

LogReader::LogReader() = default;
LogReader::~LogReader() = default;

bool LogReader::open(const std::vector<std::string>& paths, std::string& error) {
  for (const auto& path : paths) {
    const bool stdin_input = path == "-";
    int fd = stdin_input ? dup(0) : ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      error = "cannot open " + path + ": " + std::strerror(errno);
      return false;
    }
    struct stat st {};
    std::uint64_t size = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) ? st.st_size : 0;
    gzFile gz = gzdopen(fd, "rb");
    if (!gz) {
      ::close(fd);
      error = "cannot read " + path;
      return false;
    }
    gzbuffer(gz, 1 << 16);
    files_.push_back(std::make_unique<File>(*this, stdin_input ? "stdin" : path, gz, size));
  }
  return true;
}

const LogRecord* LogReader::next() {
  if (current_) recycle(std::move(current_));
  File* best = nullptr;
  std::size_t source = 0;
  limit::Micros best_at = 0;
  for (std::size_t i = 0; i < files_.size(); ++i) {
    Entry* e = files_[i]->front();
    if (e && (!best || e->record.at < best_at)) {
      best = files_[i].get();
      source = i;
      best_at = e->record.at;
    }
  }
  if (!best) return nullptr;
  current_ = best->pop();
  current_->record.source = source;
  return &current_->record;
}

double LogReader::progress() const {
  std::uint64_t total = 0, done = 0;
  for (const auto& f : files_) {
    total += f->size();
    done += std::min(f->consumed(), f->size());
  }
  return total == 0 ? 0.0 : static_cast<double>(done) / static_cast<double>(total);
}

std::unique_ptr<LogReader::Entry> LogReader::fresh_entry() {
  if (free_.empty()) return std::make_unique<Entry>();
  auto e = std::move(free_.back());
  free_.pop_back();
  return e;
}

void LogReader::recycle(std::unique_ptr<Entry> e) {
  free_.push_back(std::move(e));
}

}  // namespace floodgate::replay
