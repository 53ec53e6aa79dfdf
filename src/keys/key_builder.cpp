#include "floodgate/keys/key_builder.hpp"

#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/params.h>

#include <boost/container/small_vector.hpp>

#include <charconv>
#include <cstdint>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <string>

#include "floodgate/keys/client_ip.hpp"
#include "floodgate/keys/word_hash.hpp"

namespace floodgate::keys {

struct KeyHasher::Impl {
  EVP_MAC* mac = nullptr;
  EVP_MAC_CTX* ctx = nullptr;
  // The digests of recently hashed materials, direct-mapped by a fast hash of the material.
  // A flood from one caller, the very case the 429 path exists for, then costs one HMAC, not
  // one per request (the HMAC was a quarter of a refused request's instructions). A
  // collision only evicts; a hit compares the whole material. Bounded: kMemoSlots entries.
  static constexpr std::size_t kMemoSlots = 1024;
  struct Memo {
    std::string material;
    char hex[32];
    bool used = false;
  };
  std::unique_ptr<Memo[]> memo;
  ~Impl() {
    EVP_MAC_CTX_free(ctx);
    EVP_MAC_free(mac);
  }
};

KeyHasher::KeyHasher(std::string_view secret, Kind kind)
    : impl_(std::make_unique<Impl>()), secret_(secret), kind_(kind) {
  if (kind_ == Kind::offline) return;
  impl_->memo = std::make_unique<Impl::Memo[]>(Impl::kMemoSlots);
  impl_->mac = EVP_MAC_fetch(nullptr, "HMAC", nullptr);
  if (impl_->mac) impl_->ctx = EVP_MAC_CTX_new(impl_->mac);
  char digest[] = "SHA256";
  OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0),
                         OSSL_PARAM_construct_end()};
  if (!impl_->ctx ||
      !EVP_MAC_init(impl_->ctx, reinterpret_cast<const unsigned char*>(secret_.data()),
                    secret_.size(), params))
    throw std::runtime_error("OpenSSL HMAC-SHA256 is not available");
}

KeyHasher::~KeyHasher() = default;

std::string KeyHasher::hex(std::string_view material) {
  std::string out;
  append_hex(out, material);
  return out;
}

namespace {

void to_hex(const unsigned char* digest, char (&text)[32]) {
  static constexpr char digits[] = "0123456789abcdef";
  for (std::size_t i = 0; i < 16; ++i) {
    text[2 * i] = digits[digest[i] >> 4];
    text[2 * i + 1] = digits[digest[i] & 15];
  }
}

}  // namespace

void KeyHasher::append_hex(std::string& out, std::string_view material) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  char text[32];
  if (kind_ == Kind::offline) {
    auto [a, b] = word_hash128(material, 0x243F6A8885A308D3ULL, 0x13198A2E03707344ULL);
    std::memcpy(digest, &a, 8);
    std::memcpy(digest + 8, &b, 8);
    to_hex(digest, text);
    out.append(text, sizeof text);
    return;
  }
  auto& m = impl_->memo[std::hash<std::string_view>{}(material) & (Impl::kMemoSlots - 1)];
  if (m.used && m.material == material) {
    out.append(m.hex, sizeof m.hex);
    return;
  }
  std::size_t len = 0;
  // Re-initialising with a null key keeps the key already set: no allocation per call.
  EVP_MAC_init(impl_->ctx, nullptr, 0, nullptr);
  EVP_MAC_update(impl_->ctx, reinterpret_cast<const unsigned char*>(material.data()),
                 material.size());
  EVP_MAC_final(impl_->ctx, digest, &len, sizeof digest);
  to_hex(digest, m.hex);
  m.material.assign(material);
  m.used = true;
  out.append(m.hex, sizeof m.hex);
}

std::optional<std::string_view> query_param(std::string_view query, std::string_view name) {
  while (!query.empty()) {
    auto amp = query.find('&');
    auto pair = query.substr(0, amp);
    auto eq = pair.find('=');
    if (pair.substr(0, eq) == name) return eq == std::string_view::npos ? "" : pair.substr(eq + 1);
    if (amp == std::string_view::npos) break;
    query.remove_prefix(amp + 1);
  }
  return std::nullopt;
}

std::optional<std::string> part_value(const config::KeyPart& part, const RequestFacts& r) {
  using Kind = config::KeyPart::Kind;
  switch (part.kind) {
    case Kind::ip:
      return fold_ipv6(r.client, r.ipv6_prefix).to_string();
    case Kind::route:
      return std::string(r.route);
    case Kind::method:
      return std::string(r.method);
    case Kind::host: {
      std::string h(r.host);
      for (auto& c : h) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      return h;
    }
    case Kind::path:
      return std::string(r.path_template.empty() ? r.path : r.path_template);
    case Kind::header: {
      auto v = r.headers ? r.headers->header(part.name) : std::nullopt;
      if (!v || v->empty()) return std::nullopt;
      return std::string(*v);
    }
    case Kind::query: {
      auto v = query_param(r.query, part.name);
      if (!v || v->empty()) return std::nullopt;
      return std::string(*v);
    }
    case Kind::jwt:
      return r.claims ? r.claims->claim(part.name) : std::nullopt;
    case Kind::cookie: {
      auto v = r.headers ? r.headers->cookie(part.name) : std::nullopt;
      if (!v || v->empty()) return std::nullopt;
      return std::string(*v);
    }
    case Kind::tls: {
      if (!r.tls) return std::nullopt;
      const auto& v = part.name == "ja3" ? r.tls->ja3 : r.tls->ja4;
      if (v.empty()) return std::nullopt;
      return v;
    }
    case Kind::descriptor: {
      std::size_t i = 0;
      const auto* end = part.name.data() + part.name.size();
      if (std::from_chars(part.name.data(), end, i).ptr != end || i >= r.descriptor.size())
        return std::nullopt;
      return std::string(r.descriptor[i]);  // an empty value is a value (Envoy sends them)
    }
  }
  return std::nullopt;
}

std::optional<std::string_view> HeaderSource::cookie(std::string_view name) const {
  auto h = header("cookie");
  return h ? cookie_value(*h, name) : std::nullopt;
}

std::optional<std::string_view> cookie_value(std::string_view header, std::string_view name) {
  auto trim = [](std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
    return s;
  };
  while (!header.empty()) {
    const auto semi = header.find(';');
    const auto pair = trim(header.substr(0, semi));
    const auto eq = pair.find('=');
    if (eq != std::string_view::npos && trim(pair.substr(0, eq)) == name) {
      auto value = trim(pair.substr(eq + 1));
      if (value.size() >= 2 && value.front() == '"' && value.back() == '"')
        value = value.substr(1, value.size() - 2);  // RFC 6265: DQUOTE *cookie-octet DQUOTE
      return value;
    }
    if (semi == std::string_view::npos) break;
    header.remove_prefix(semi + 1);
  }
  return std::nullopt;
}

std::string_view matching_template(const config::Route& route, std::string_view path) {
  for (const auto& t : route.path_templates)
    if (t.matches(path)) return t.text;
  return {};
}

void append_caller_text(std::string& out, const config::Limit& limit, const RequestFacts& r) {
  constexpr std::size_t kMax = 256;
  const std::size_t start = out.size();
  auto put = [&](std::string_view text) {
    for (char ch : text) {
      if (out.size() - start >= kMax) return;
      const auto c = static_cast<unsigned char>(ch);
      // The backslash is escaped too: else the value `\x41` would read back as `A`, and an
      // override copied from /top would hit another caller (caller_key reads \xHH back).
      if (c >= 0x20 && c < 0x7f && c != '\\') {
        out += ch;
      } else {
        static constexpr char kHex[] = "0123456789abcdef";
        const char escaped[] = {'\\', 'x', kHex[c >> 4], kHex[c & 15]};
        out.append(escaped, sizeof escaped);
      }
    }
  };
  for (const auto& part : limit.key) {
    if (part.kind == config::KeyPart::Kind::route || part.kind == config::KeyPart::Kind::method)
      continue;  // the same for every caller of a route's limit: noise
    if (out.size() > start) out += ' ';
    out += part.text;
    out += '=';
    auto v = part_value(part, r);
    put(v ? std::string_view(*v) : std::string_view("(missing: shared)"));
  }
  if (out.size() == start) out += "(everyone)";
}

BuiltKey build_key(std::string_view prefix, const config::Route& route, const config::Limit& limit,
                   const RequestFacts& request, KeyHasher& hasher) {
  BuiltKey out;
  out.missing = build_key_into(out.key, prefix, route, limit, request, hasher);
  return out;
}

bool build_key_into(std::string& key, std::string_view prefix, const config::Route& route,
                    const config::Limit& limit, const RequestFacts& request, KeyHasher& hasher) {
  key.clear();
  // Built on the stack: this runs for every limit of every request.
  boost::container::small_vector<char, 256> material;
  auto append = [&material](std::string_view text) {
    material.insert(material.end(), text.begin(), text.end());
  };
  auto append_number = [&material](std::size_t n) {
    char digits[24];
    auto [end, ec] = std::to_chars(digits, digits + sizeof digits, n);
    material.insert(material.end(), digits, end);
  };
  auto head = [&] {
    key.append(prefix).append(":").append(route.name).append(":").append(limit.name);
  };
  for (const auto& part : limit.key) {
    auto value = part_value(part, request);
    if (!value) {
      if (limit.on_missing_key != config::OnMissingKey::shared) return true;
      head();
      key.append(":{shared}");
      return true;
    }
    // kind, length, value: "ip" + "9:127.0.0.1" can never equal another split of the bytes.
    append_number(static_cast<std::size_t>(part.kind));
    material.push_back(':');
    append_number(part.name.size());
    material.push_back(':');
    append(part.name);
    append_number(value->size());
    material.push_back(':');
    append(*value);
  }
  key.reserve(prefix.size() + route.name.size() + limit.name.size() + 40);
  head();
  key.append(":{");
  hasher.append_hex(key, std::string_view(material.data(), material.size()));
  key += '}';
  return false;
}

}  // namespace floodgate::keys
