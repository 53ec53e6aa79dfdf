#pragma once
// A TLS client's ClientHello fingerprints, computed once per connection on TLS listeners when
// a limit, a list or the replay log keys on them (`tls:ja4`, `tls:ja3`). They identify the
// client's TLS stack and its settings (a browser build, a curl, a bot framework), not a person
// or a device: every client of one build shares one, a client that changes its cipher list or
// extensions changes it, and a source address plays no part in it.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

struct ssl_st;

namespace floodgate::tls {

struct Fingerprints {
  std::string ja4;  // "t13d1516h2_8daaf6152771_e5627efa2ab1" (FoxIO's JA4; "q..." over QUIC)
  std::string ja3;  // 32 hex digits: MD5 of "771,4865-4866-...,0-23-...,29-23-24,0"
};

// What the fingerprints read from a ClientHello, in the order the client sent them.
struct ClientHello {
  std::uint16_t legacy_version = 0;  // 0x0303 for TLS 1.2 and 1.3
  std::vector<std::uint16_t> ciphers;
  std::vector<std::uint16_t> extensions;            // types, in order
  std::vector<std::uint16_t> supported_versions;    // extension 0x002b
  std::vector<std::uint16_t> signature_algorithms;  // extension 0x000d
  std::vector<std::uint16_t> groups;                // extension 0x000a
  std::vector<std::uint8_t> point_formats;          // extension 0x000b
  std::string first_alpn;                           // extension 0x0010's first protocol
};

// The fields of a ClientHello handshake message (type, 24-bit length, body), or nullopt when
// it is not a whole one. Read from the bytes because OpenSSL 3.0's own accessors skip the
// extensions it does not know (GREASE, and ones browsers send), which both fingerprints count.
std::optional<ClientHello> parse_client_hello(std::string_view message);

// Pure: the two fingerprints of a ClientHello (GREASE values left out, as both define); JA4
// starts with `q` for one that came over QUIC, `t` over TCP.
Fingerprints fingerprints_of(const ClientHello& hello, bool quic = false);

// Asks for `ssl`'s fingerprints: its first ClientHello, as OpenSSL reads it during the
// handshake (a message callback on this connection only), fills `out` in. `out` must outlive
// the handshake.
void collect_fingerprints(ssl_st* ssl, Fingerprints* out);

}  // namespace floodgate::tls
