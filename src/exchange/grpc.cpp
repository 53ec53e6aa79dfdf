#include "grpc.hpp"

#include <charconv>
#include <string>

#include "floodgate/ascii.hpp"

namespace floodgate::http {

std::string percent_encoded(std::string_view text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(text.size());
  for (unsigned char c : text) {
    if (c >= 0x20 && c <= 0x7e && c != '%') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

namespace {

std::string message_for(const Reply& r) {
  if (r.refusal)
    return "rate limited by floodgate (limit " + r.refusal->limit->name + "), retry after " +
           std::to_string(limit::retry_after_seconds(r.refusal->decision)) + "s";
  std::string storage;
  std::string line(reply_body(r, storage));
  while (!line.empty() && line.back() == '\n') line.pop_back();
  return line;
}

}  // namespace

bool is_grpc(const Fields& request) {
  auto type = request.find("content-type");
  if (!type) return false;
  std::string_view v = *type;
  constexpr std::string_view kType = "application/grpc";
  if (v.size() < kType.size() || !iequals(v.substr(0, kType.size()), kType)) return false;
  return v.size() == kType.size() || v[kType.size()] == '+' || v[kType.size()] == ';';
}

int grpc_status_for(int http_status) {
  switch (http_status) {
    case 429:
    case 413:
    case 431:
      return 8;  // RESOURCE_EXHAUSTED
    case 502:
    case 503:
      return 14;  // UNAVAILABLE
    case 504:
      return 4;  // DEADLINE_EXCEEDED
    case 401:
      return 16;  // UNAUTHENTICATED
    case 404:
      return 12;  // UNIMPLEMENTED
    case 400:
      return 13;  // INTERNAL
    default:
      return 2;  // UNKNOWN
  }
}

void grpc_reply_fields(const Reply& r, const limit::HeaderSink& emit) {
  char digits[24];
  auto number = [&](std::int64_t n) {
    auto [end, ec] = std::to_chars(digits, digits + sizeof digits, n);
    return std::string_view(digits, static_cast<std::size_t>(end - digits));
  };
  // A refusal is RESOURCE_EXHAUSTED whatever status a route's refusal page gives browsers.
  emit("grpc-status", number(grpc_status_for(r.refusal ? 429 : r.status)));
  emit("grpc-message", percent_encoded(message_for(r)));
  if (r.refusal) {
    // Milliseconds, rounded up: a client that comes back after them is admitted.
    const auto ms = (std::max<limit::Micros>(r.refusal->decision.retry_after, 1) + 999) / 1000;
    emit("grpc-retry-pushback-ms", number(ms));
  }
  reply_headers(r, emit);
}

}  // namespace floodgate::http
