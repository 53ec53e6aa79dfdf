#pragma once
// The bytes floodgate writes: message heads serialized into one flat buffer (one copy per
// field, no per-field buffer sequence for the kernel to walk) and the answers it gives
// itself (errors, 429s) rendered complete, so each leaves in a single write.

#include <string>
#include <string_view>

#include "exchange/fields.hpp"

namespace floodgate::http {

// Appends the start line, every field and the blank line.
void append_head(std::string& out, const RequestHead& h);
void append_head(std::string& out, const ResponseHead& h);

// A response floodgate gives itself, already serialized.
struct Answer {
  unsigned status = 0;
  bool keep_alive = false;
  std::string bytes;
  std::size_t body_bytes = 0;  // the end of `bytes` that is the body
};

// Builds an Answer: status line, Server, Content-Type, the caller's own header lines,
// Content-Length, Connection: close unless kept alive, then the body.
class AnswerWriter {
 public:
  AnswerWriter(unsigned status, unsigned version, bool keep_alive);
  AnswerWriter& header(std::string_view name, std::string_view value);
  Answer finish(std::string_view content_type, std::string_view body) &&;

 private:
  Answer a_;
  unsigned version_;
};

}  // namespace floodgate::http
