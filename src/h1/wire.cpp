#include "wire.hpp"

#include <boost/beast/http/status.hpp>

#include <charconv>
#include <cstring>

namespace floodgate::http {

namespace bhttp = boost::beast::http;

namespace {

void append_version(std::string& out, unsigned version) {
  out += version >= 11 ? "HTTP/1.1" : "HTTP/1.0";
}

void append_number(std::string& out, std::uint64_t n) {
  char digits[24];
  auto [end, ec] = std::to_chars(digits, digits + sizeof digits, n);
  out.append(digits, end);
}

// Measured first, then copied into place: one growth of `out`, not four appends a field.
void append_fields(std::string& out, const Fields& f) {
  std::size_t size = 2;
  for (const auto& field : f) size += field.name.size() + field.value.size() + 4;
  const auto at = out.size();
  out.resize(at + size);
  char* p = out.data() + at;
  auto put = [&p](std::string_view s) {
    if (!s.empty()) std::memcpy(p, s.data(), s.size());
    p += s.size();
  };
  for (const auto& field : f) {
    put(field.name);
    *p++ = ':';
    *p++ = ' ';
    put(field.value);
    *p++ = '\r';
    *p++ = '\n';
  }
  *p++ = '\r';
  *p = '\n';
}

void append_status_line(std::string& out, unsigned version, unsigned status,
                        std::string_view reason) {
  append_version(out, version);
  out += ' ';
  append_number(out, status);
  out += ' ';
  out += reason;
  out += "\r\n";
}

}  // namespace

void append_head(std::string& out, const RequestHead& h) {
  out += h.method;
  out += ' ';
  out += h.target;
  out += ' ';
  append_version(out, h.version);
  out += "\r\n";
  append_fields(out, h.fields);
}

void append_head(std::string& out, const ResponseHead& h) {
  std::string_view reason = h.reason;
  if (reason.empty()) reason = bhttp::obsolete_reason(static_cast<bhttp::status>(h.status));
  append_status_line(out, h.version, static_cast<unsigned>(h.status), reason);
  append_fields(out, h.fields);
}

AnswerWriter::AnswerWriter(unsigned status, unsigned version, bool keep_alive) : version_(version) {
  a_.status = status;
  a_.keep_alive = keep_alive;
  a_.bytes.reserve(512);
  append_status_line(a_.bytes, version, status,
                     bhttp::obsolete_reason(static_cast<bhttp::status>(status)));
  a_.bytes += "Server: floodgate\r\n";
}

AnswerWriter& AnswerWriter::header(std::string_view name, std::string_view value) {
  a_.bytes += name;
  a_.bytes += ": ";
  a_.bytes += value;
  a_.bytes += "\r\n";
  return *this;
}

Answer AnswerWriter::finish(std::string_view content_type, std::string_view body) && {
  header("Content-Type", content_type);
  a_.bytes += "Content-Length: ";
  append_number(a_.bytes, body.size());
  a_.bytes += "\r\n";
  // HTTP/1.1 is persistent unless told otherwise; HTTP/1.0 only when told so.
  if (!a_.keep_alive && version_ >= 11)
    a_.bytes += "Connection: close\r\n";
  else if (a_.keep_alive && version_ < 11)
    a_.bytes += "Connection: keep-alive\r\n";
  a_.bytes += "\r\n";
  a_.bytes += body;
  a_.body_bytes = body.size();
  return std::move(a_);
}

}  // namespace floodgate::http
