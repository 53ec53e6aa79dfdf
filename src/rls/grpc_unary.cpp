#include "grpc_unary.hpp"

#include <charconv>

namespace floodgate::rls {

Unframed unframe(std::string_view body, std::size_t max, std::string_view& message) {
  if (body.empty()) return Unframed::none;
  if (body.size() < 5) return Unframed::truncated;
  const auto flag = static_cast<unsigned char>(body[0]);
  std::uint32_t length = 0;
  for (int i = 1; i < 5; ++i) length = (length << 8) | static_cast<unsigned char>(body[i]);
  if (flag != 0) return Unframed::compressed;
  if (length > max) return Unframed::too_large;
  if (body.size() - 5 < length) return Unframed::truncated;
  if (body.size() - 5 > length) return Unframed::extra;
  message = body.substr(5, length);
  return Unframed::ok;
}

GrpcCode code_of(Unframed u) {
  switch (u) {
    case Unframed::ok:
      return GrpcCode::ok;
    case Unframed::compressed:
      // No grpc-encoding is accepted but identity (gRPC's compression.md): unimplemented.
      return GrpcCode::unimplemented;
    case Unframed::too_large:
      return GrpcCode::resource_exhausted;
    case Unframed::none:
    case Unframed::truncated:
    case Unframed::extra:
      break;
  }
  return GrpcCode::invalid_argument;
}

const char* describe(Unframed u) {
  switch (u) {
    case Unframed::ok:
      return "ok";
    case Unframed::none:
      return "the request has no message";
    case Unframed::truncated:
      return "the request's message is cut short";
    case Unframed::extra:
      return "a unary request carries one message";
    case Unframed::compressed:
      return "compressed messages are not accepted (grpc-accept-encoding: identity)";
    case Unframed::too_large:
      return "the request's message is too large";
  }
  return "";
}

void frame(std::string& out, std::string_view message) {
  const auto n = static_cast<std::uint32_t>(message.size());
  out.push_back('\0');
  for (int shift = 24; shift >= 0; shift -= 8)
    out.push_back(static_cast<char>((n >> shift) & 0xff));
  out.append(message);
}

std::optional<std::chrono::microseconds> parse_timeout(std::string_view text) {
  if (text.size() < 2 || text.size() > 9) return std::nullopt;
  const auto digits = text.substr(0, text.size() - 1);
  std::int64_t n = 0;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), n);
  if (ec != std::errc() || end != digits.data() + digits.size() || n <= 0) return std::nullopt;
  using std::chrono::microseconds;
  switch (text.back()) {
    case 'H':
      return microseconds(n * 3'600'000'000LL);
    case 'M':
      return microseconds(n * 60'000'000LL);
    case 'S':
      return microseconds(n * 1'000'000LL);
    case 'm':
      return microseconds(n * 1'000LL);
    case 'u':
      return microseconds(n);
    case 'n':
      return microseconds(std::max<std::int64_t>(1, n / 1000));
    default:
      return std::nullopt;
  }
}

}  // namespace floodgate::rls
