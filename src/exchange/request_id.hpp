#pragma once
// Each exchange's X-Request-Id and W3C trace context (traceparent), set before anything can
// answer it, so that floodgate's own answers, the origin's request and the access log all
// carry the same id.
//
// X-Request-Id: kept when the socket peer is a trusted proxy (server.client_ip.
// trusted_proxies) and the value is a sane token (1 to 128 of [A-Za-z0-9._:-]); generated
// otherwise (32 hex digits, as nginx's $request_id), and a client's own is then replaced.
// traceparent: a valid one is passed through untouched; an absent or malformed one starts a
// trace (version 00, the request id as trace-id when it was generated here, a new span-id,
// sampled), and a malformed one's tracestate is dropped with it (W3C Trace Context 4.3).

#include <cstdint>
#include <random>
#include <string>

#include "exchange.hpp"

namespace floodgate::http {

// A worker's source of ids (not for secrets: ids only need to be unique).
class RequestIds {
 public:
  RequestIds();
  // `n` random bytes as 2n lower-case hex digits written at `out`; where they end.
  char* write_hex(char* out, std::size_t n);

 private:
  std::mt19937_64 rng_;
};

// Sets x.request_id, and x.traceparent when a trace starts here; x.fields and x.peer are read.
void identify(Exchange& x, RequestIds& ids);

// The origin's request carries the exchange's id and trace context.
void add_trace_fields(const Exchange& x, Fields& req);

}  // namespace floodgate::http
