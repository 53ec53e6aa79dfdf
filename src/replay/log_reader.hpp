#pragma once
// Access log files as a stream of requests in time order: each file is read through zlib
// (gzipped or plain, told apart by zlib itself; "-" is standard input), split into lines,
// parsed as floodgate JSON or nginx combined (decided per line), and several files are
// merged by timestamp, as the logs of several instances sharing one store would be.
// Memory: one line per file, plus one second of lines for nginx logs (whose time has whole
// seconds only: a second's requests are spread evenly across it, in their order).

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "log_record.hpp"

namespace floodgate::replay {

struct LineCounts {
  std::uint64_t lines = 0;
  std::uint64_t requests = 0;
  std::uint64_t skipped = 0;  // not requests: other JSON log lines, nginx lines without a request
  std::uint64_t bad = 0;
  std::map<std::string, std::uint64_t> bad_reasons;  // reason -> count
  std::map<std::string, std::string> first_bad;      // reason -> "file:line"
  std::uint64_t nginx_lines = 0;
  std::uint64_t json_lines = 0;
};

class LogReader {
 public:
  // Opens every file; returns false with `error` set if one cannot be opened.
  bool open(const std::vector<std::string>& paths, std::string& error);
  LogReader();
  ~LogReader();

  // The next request in time order across the files, or null at the end. Valid until the
  // following call.
  const LogRecord* next();
  const LineCounts& counts() const { return counts_; }
  // Of all input bytes (compressed, as on disk), the share read so far (0..1; 0 if unknown).
  double progress() const;
  // A file that failed while being read (a truncated gzip, an I/O error).
  const std::vector<std::string>& read_errors() const { return read_errors_; }

 private:
  struct Entry {
    std::string line;
    std::string scratch;
    LogRecord record;
  };
  class File;

  std::unique_ptr<Entry> fresh_entry();
  void recycle(std::unique_ptr<Entry> e);

  std::vector<std::unique_ptr<File>> files_;
  std::vector<std::unique_ptr<Entry>> free_;
  std::unique_ptr<Entry> current_;  // what next() returned last
  LineCounts counts_;
  std::vector<std::string> read_errors_;
};

}  // namespace floodgate::replay
