#pragma once
// A unary gRPC call's framing over HTTP/2 (gRPC's PROTOCOL-HTTP2): the request's one
// length-prefixed message, the `grpc-timeout` header, and the response's message and
// status. Errors are values; nothing here throws.

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace floodgate::rls {

// gRPC's status codes, as the protocol numbers them.
enum class GrpcCode : int {
  ok = 0,
  invalid_argument = 3,
  deadline_exceeded = 4,
  resource_exhausted = 8,
  unimplemented = 12,
  internal = 13,
  unavailable = 14,
};

// Why a request body is not one message.
enum class Unframed {
  ok,
  none,        // no message (an empty body)
  truncated,   // a prefix or message cut short
  extra,       // bytes after the message (a unary call carries exactly one)
  compressed,  // compressed-flag set: floodgate accepts identity only
  too_large,   // longer than the limit
};

// The one message of a unary request's body (within `max` bytes) into `message`.
Unframed unframe(std::string_view body, std::size_t max, std::string_view& message);
// The status a body that is not one message is answered with, and its message.
GrpcCode code_of(Unframed u);
const char* describe(Unframed u);

// Appends `message` to `out` with its 5-byte prefix (not compressed).
void frame(std::string& out, std::string_view message);

// `grpc-timeout`: 1-8 digits and a unit (H M S m u n). Absent or malformed: no deadline
// (nullopt); zero as well (Envoy sends a 0 timeout as "none").
std::optional<std::chrono::microseconds> parse_timeout(std::string_view text);

}  // namespace floodgate::rls
