#include "request_id.hpp"

#include <algorithm>
#include <array>

namespace floodgate::http {

namespace {

bool sane_id(std::string_view v) {
  return !v.empty() && v.size() <= 128 && std::all_of(v.begin(), v.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '_' || c == ':' || c == '-';
  });
}

bool lower_hex(std::string_view v) {
  return std::all_of(v.begin(), v.end(),
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

// version 00: "00-" 32 hex "-" 16 hex "-" 2 hex, ids not all zeros (W3C Trace Context 3.2).
// A later version may be longer; its first 55 characters are read the same way.
bool valid_traceparent(std::string_view v) {
  if (v.size() < 55 || (v.size() > 55 && (v.substr(0, 2) == "00" || v[55] != '-'))) return false;
  if (v[2] != '-' || v[35] != '-' || v[52] != '-') return false;
  const auto version = v.substr(0, 2), trace = v.substr(3, 32), span = v.substr(36, 16),
             flags = v.substr(53, 2);
  if (!lower_hex(version) || version == "ff" || !lower_hex(trace) || !lower_hex(span) ||
      !lower_hex(flags))
    return false;
  auto zeros = [](std::string_view s) {
    return s.find_first_not_of('0') == std::string_view::npos;
  };
  return !zeros(trace) && !zeros(span);
}

}  // namespace

namespace {
// Every bit of the generator's state from the system's entropy: one 32-bit seed would repeat
// whole streams of ids (and trace ids) across a fleet's workers and restarts.
std::mt19937_64 seeded() {
  std::random_device rd;
  std::array<std::uint32_t, 16> words;
  for (auto& w : words) w = rd();
  std::seed_seq seq(words.begin(), words.end());
  return std::mt19937_64(seq);
}
}  // namespace

RequestIds::RequestIds() : rng_(seeded()) {}

char* RequestIds::write_hex(char* p, std::size_t n) {
  static constexpr char kHex[] = "0123456789abcdef";
  // Written into place, 16 digits a draw: a character at a time through a string cost more
  // than the rest of the request's identification.
  while (n > 0) {
    auto r = rng_();
    for (int i = 0; i < 8 && n > 0; ++i, --n, r >>= 8) {
      *p++ = kHex[(r >> 4) & 0xf];
      *p++ = kHex[r & 0xf];
    }
  }
  return p;
}

void identify(Exchange& x, RequestIds& ids) {
  x.request_id = {};
  x.traceparent = {};
  x.drop_tracestate = false;
  const auto& fields = *x.fields;
  const auto& client_ip = x.config->server.client_ip;
  bool generated = false;
  if (auto id = fields.find("x-request-id");
      id && sane_id(*id) &&
      std::any_of(client_ip.trusted_proxies.begin(), client_ip.trusted_proxies.end(),
                  [&](const config::Cidr& c) { return c.contains(x.peer); })) {
    x.request_id = *id;  // a view of the field, which the exchange's request keeps
  } else {
    x.request_id = {x.id_text, static_cast<std::size_t>(ids.write_hex(x.id_text, 16) - x.id_text)};
    generated = true;
  }
  auto tp = fields.find("traceparent");
  // One valid traceparent passes through; two are as malformed as a bad one.
  if (tp && fields.count("traceparent") == 1 && valid_traceparent(*tp)) return;
  x.drop_tracestate = tp.has_value();
  // "00-" trace id "-" parent id "-01": 55 characters, written in place.
  char* p = x.trace_text;
  *p++ = '0';
  *p++ = '0';
  *p++ = '-';
  if (generated)
    p = std::copy(x.request_id.begin(), x.request_id.end(), p);
  else
    p = ids.write_hex(p, 16);
  *p++ = '-';
  p = ids.write_hex(p, 8);
  *p++ = '-';
  *p++ = '0';
  *p++ = '1';
  x.traceparent = {x.trace_text, static_cast<std::size_t>(p - x.trace_text)};
}

void add_trace_fields(const Exchange& x, Fields& req) {
  if (!x.request_id.empty()) req.set("X-Request-Id", x.request_id);
  if (!x.traceparent.empty()) {
    req.set("traceparent", x.traceparent);
    if (x.drop_tracestate) req.erase("tracestate");
  }
}

}  // namespace floodgate::http
