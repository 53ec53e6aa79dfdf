#pragma once
// gRPC over HTTP/2 as floodgate meets it (gRPC's PROTOCOL-HTTP2.md). A call is told by its
// content-type. An answer of floodgate's own to a call is a trailers-only response (one
// HEADERS frame with END_STREAM, :status 200) carrying grpc-status: a gRPC client maps any
// other HTTP status to UNAVAILABLE or UNKNOWN and retries blindly, while RESOURCE_EXHAUSTED
// with grpc-retry-pushback-ms tells its retry policy when to come back.

#include <string>
#include <string_view>

#include "exchange.hpp"
#include "floodgate/limit/policy.hpp"

namespace floodgate::http {

// content-type application/grpc, alone or followed by '+' (a codec) or ';' (parameters).
bool is_grpc(const Fields& request);

// The gRPC status floodgate answers for one of its HTTP statuses: 429 -> 8
// RESOURCE_EXHAUSTED, 503 (fail_closed) and 502 -> 14 UNAVAILABLE, 504 -> 4
// DEADLINE_EXCEEDED, 401 -> 16 UNAUTHENTICATED, 404 -> 12 UNIMPLEMENTED, 413/431 -> 8, 400 -> 13
// INTERNAL (as gRPC's own HTTP mapping), anything else 2 UNKNOWN.
int grpc_status_for(int http_status);

// grpc-message's form: percent-encoded UTF-8, bytes outside printable ASCII and '%' escaped.
std::string percent_encoded(std::string_view text);

// The trailers-only answer's fields beyond :status and content-type: grpc-status,
// grpc-message (percent-encoded), for a refusal grpc-retry-pushback-ms, then reply_headers()
// (retry-after and the rate-limit fields).
void grpc_reply_fields(const Reply& r, const limit::HeaderSink& emit);

}  // namespace floodgate::http
