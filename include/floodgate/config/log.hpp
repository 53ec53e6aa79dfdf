#pragma once
// `log:`: the process log's level and format, and the access log's destinations and the
// request inputs it records for `floodgate replay`.

#include <string>
#include <vector>

namespace floodgate::config {

enum class LogLevel { trace, debug, info, warn, error, off };
enum class LogFormat { text, json };

// A request input the access log records for `floodgate replay` (opt-in): what a candidate
// config's keys may need beyond the method and path every line carries.
struct ReplayField {
  // descriptors: an RLS call's domain and descriptors (rls:domain, rls:N, rls:N:hits,
  // rls:N:limit), recorded by the RLS listener itself.
  enum class Kind { ip, host, header, query, jwt, cookie, tls, descriptors } kind = Kind::ip;
  std::string name;          // header (lower case) / query parameter / claim / cookie / ja4|ja3
  bool hashed = false;       // recorded as a keyed hash: comparable, not readable
  std::string text() const;  // "ip", "header:x-api-key", ...: the log's field name
};

struct LogSettings {
  LogLevel level = LogLevel::info;
  LogFormat format = LogFormat::text;
  bool access_log = false;
  // `access_log: { path, stdout }`: the file the lines go to (empty: stdout only), opened at
  // start (a reload cannot move it) and reopened on SIGUSR1 (logrotate); stdout as well when
  // `stdout: true`.
  std::string access_log_path;
  bool access_log_stdout = true;
  // Recorded in each access log line's "fields" (and the routes' settle headers in "settle");
  // `replay_fields: auto` is expanded at load to ip, host and every input the limits name.
  std::vector<ReplayField> replay_fields;
};

}  // namespace floodgate::config
