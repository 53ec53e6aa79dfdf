#include "floodgate/tls/fingerprint.hpp"

#include <openssl/evp.h>
#include <openssl/ssl.h>

#include <algorithm>
#include <cstdio>

namespace floodgate::tls {

namespace {

// RFC 8701: GREASE values are 0x?a?a with both bytes equal; clients sprinkle them randomly,
// so both fingerprints leave them out.
bool grease(std::uint16_t v) {
  return (v & 0x0f0f) == 0x0a0a && (v >> 8) == (v & 0xff);
}

std::vector<std::uint16_t> without_grease(const std::vector<std::uint16_t>& v) {
  std::vector<std::uint16_t> out;
  out.reserve(v.size());
  for (auto x : v)
    if (!grease(x)) out.push_back(x);
  return out;
}

std::string digest_hex(const EVP_MD* md, const std::string& text, std::size_t digits) {
  unsigned char d[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_Digest(text.data(), text.size(), d, &len, md, nullptr) != 1) return {};
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned i = 0; i < len && out.size() < digits; ++i) {
    out += kHex[d[i] >> 4];
    out += kHex[d[i] & 15];
  }
  out.resize(std::min(out.size(), digits));
  return out;
}

// "0a0a,1301": 4 lower-case hex digits each.
std::string hex_list(const std::vector<std::uint16_t>& v) {
  std::string out;
  char four[8];
  for (std::size_t i = 0; i < v.size(); ++i) {
    std::snprintf(four, sizeof four, "%04x", v[i]);
    if (i) out += ',';
    out += four;
  }
  return out;
}

template <typename T>
std::string decimal_list(const std::vector<T>& v) {
  std::string out;
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (i) out += '-';
    out += std::to_string(v[i]);
  }
  return out;
}

std::string version_code(std::uint16_t v) {
  switch (v) {
    case 0x0304:
      return "13";
    case 0x0303:
      return "12";
    case 0x0302:
      return "11";
    case 0x0301:
      return "10";
    case 0x0300:
      return "s3";
    case 0x0002:
      return "s2";
    case 0xfeff:
      return "d1";
    case 0xfefd:
      return "d2";
    case 0xfefc:
      return "d3";
  }
  return "00";
}

bool alphanumeric(unsigned char c) {
  return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
}

std::string two_digits(std::size_t n) {
  n = std::min<std::size_t>(n, 99);
  return std::string(1, static_cast<char>('0' + n / 10)) + static_cast<char>('0' + n % 10);
}

std::string ja4_of(const ClientHello& h, bool quic) {
  const auto ciphers = without_grease(h.ciphers);
  const auto extensions = without_grease(h.extensions);
  const auto versions = without_grease(h.supported_versions);
  std::string a = quic ? "q" : "t";  // JA4's transport: QUIC or TCP
  a += version_code(versions.empty() ? h.legacy_version
                                     : *std::max_element(versions.begin(), versions.end()));
  a += std::find(extensions.begin(), extensions.end(), 0x0000) != extensions.end() ? 'd' : 'i';
  a += two_digits(ciphers.size());
  a += two_digits(extensions.size());
  if (h.first_alpn.empty()) {
    a += "00";
  } else {
    const auto first = static_cast<unsigned char>(h.first_alpn.front());
    const auto last = static_cast<unsigned char>(h.first_alpn.back());
    if (alphanumeric(first) && alphanumeric(last)) {
      a += static_cast<char>(first);
      a += static_cast<char>(last);
    } else {  // the first and last hex digits of the value instead
      static constexpr char kHex[] = "0123456789abcdef";
      a += kHex[first >> 4];
      a += kHex[last & 15];
    }
  }
  auto sorted_ciphers = ciphers;
  std::sort(sorted_ciphers.begin(), sorted_ciphers.end());
  const std::string b = sorted_ciphers.empty()
                            ? std::string(12, '0')
                            : digest_hex(EVP_sha256(), hex_list(sorted_ciphers), 12);
  std::vector<std::uint16_t> sorted_extensions;
  for (auto e : extensions)
    if (e != 0x0000 && e != 0x0010) sorted_extensions.push_back(e);  // SNI and ALPN: in a
  std::sort(sorted_extensions.begin(), sorted_extensions.end());
  std::string c_text = hex_list(sorted_extensions);
  const auto signatures = without_grease(h.signature_algorithms);
  if (!signatures.empty()) c_text += "_" + hex_list(signatures);  // in the client's order
  const std::string c =
      sorted_extensions.empty() ? std::string(12, '0') : digest_hex(EVP_sha256(), c_text, 12);
  return a + "_" + b + "_" + c;
}

std::string ja3_of(const ClientHello& h) {
  std::string text = std::to_string(h.legacy_version);
  text += ',' + decimal_list(without_grease(h.ciphers));
  text += ',' + decimal_list(without_grease(h.extensions));
  text += ',' + decimal_list(without_grease(h.groups));
  text += ',' + decimal_list(h.point_formats);
  return digest_hex(EVP_md5(), text, 32);
}

// Reads a ClientHello's fields from its bytes, bounds checked: a short or malformed one
// reads as far as it is whole (the handshake itself decides what to make of it).
class Reader {
 public:
  explicit Reader(std::string_view s) : s_(s) {}
  bool ok() const { return ok_; }
  std::size_t left() const { return ok_ ? s_.size() - at_ : 0; }
  unsigned u8() { return need(1) ? static_cast<unsigned char>(s_[at_++]) : 0; }
  unsigned u16() {
    const unsigned hi = u8();
    return (hi << 8) | u8();
  }
  unsigned u24() {
    const unsigned hi = u16();
    return (hi << 8) | u8();
  }
  std::string_view bytes(std::size_t n) {
    if (!need(n)) return {};
    auto out = s_.substr(at_, n);
    at_ += n;
    return out;
  }

 private:
  bool need(std::size_t n) {
    ok_ = ok_ && s_.size() - at_ >= n;
    return ok_;
  }
  std::string_view s_;
  std::size_t at_ = 0;
  bool ok_ = true;
};

// Big-endian 16-bit values after a length prefix of `prefix` bytes (1 or 2).
std::vector<std::uint16_t> u16_list(std::string_view data, int prefix) {
  Reader r(data);
  Reader list(r.bytes(prefix == 1 ? r.u8() : r.u16()));
  std::vector<std::uint16_t> out;
  while (list.left() >= 2) out.push_back(static_cast<std::uint16_t>(list.u16()));
  return out;
}

// OpenSSL's message callback (SSL_set_msg_callback): the first ClientHello the connection
// reads, whole and reassembled, becomes its fingerprints; then the callback takes itself off.
void on_message(int write_p, int, int content_type, const void* buf, std::size_t len, SSL* ssl,
                void* arg) {
  const auto* bytes = static_cast<const unsigned char*>(buf);
  if (write_p || content_type != SSL3_RT_HANDSHAKE || len == 0 || bytes[0] != SSL3_MT_CLIENT_HELLO)
    return;
  SSL_set_msg_callback(ssl, nullptr);  // a second hello (after a HelloRetryRequest) is not read
  try {
    if (auto hello = parse_client_hello(std::string_view(static_cast<const char*>(buf), len)))
      *static_cast<Fingerprints*>(arg) = fingerprints_of(*hello);
  } catch (...) {  // out of memory: the connection goes on without them (no exception may
  }                // cross into OpenSSL)
}

}  // namespace

Fingerprints fingerprints_of(const ClientHello& hello, bool quic) {
  return Fingerprints{ja4_of(hello, quic), ja3_of(hello)};
}

std::optional<ClientHello> parse_client_hello(std::string_view message) {
  Reader r(message);
  if (r.u8() != 1) return std::nullopt;  // msg_type client_hello
  Reader body(r.bytes(r.u24()));
  ClientHello h;
  h.legacy_version = static_cast<std::uint16_t>(body.u16());
  body.bytes(32);         // random
  body.bytes(body.u8());  // legacy_session_id
  Reader ciphers(body.bytes(body.u16()));
  while (ciphers.left() >= 2) h.ciphers.push_back(static_cast<std::uint16_t>(ciphers.u16()));
  body.bytes(body.u8());  // legacy_compression_methods
  if (!body.ok()) return std::nullopt;
  Reader extensions(body.bytes(body.u16()));  // absent in a bare TLS 1.0 hello: none
  while (extensions.left() >= 4) {
    const auto type = static_cast<std::uint16_t>(extensions.u16());
    const auto data = extensions.bytes(extensions.u16());
    if (!extensions.ok()) break;
    h.extensions.push_back(type);
    switch (type) {
      case 0x002b:  // supported_versions
        h.supported_versions = u16_list(data, 1);
        break;
      case 0x000d:  // signature_algorithms
        h.signature_algorithms = u16_list(data, 2);
        break;
      case 0x000a:  // supported_groups
        h.groups = u16_list(data, 2);
        break;
      case 0x000b: {  // ec_point_formats
        Reader f(data);
        const auto formats = f.bytes(f.u8());
        h.point_formats.assign(formats.begin(), formats.end());
        break;
      }
      case 0x0010: {  // ALPN: a list of 1-byte-length names; the first
        Reader list(data);
        Reader names(list.bytes(list.u16()));
        h.first_alpn = std::string(names.bytes(names.u8()));
        break;
      }
      default:
        break;
    }
  }
  return h;
}

void collect_fingerprints(ssl_st* ssl, Fingerprints* out) {
  SSL_set_msg_callback(ssl, &on_message);
  SSL_set_msg_callback_arg(ssl, out);
}

}  // namespace floodgate::tls
