#include "floodgate/keys/key_builder.hpp"

#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/params.h>

#include <cstdint>
#include <cstring>
#include <stdexcept>

namespace floodgate::keys {

struct KeyHasher::Impl {
  EVP_MAC* mac = nullptr;
  EVP_MAC_CTX* ctx = nullptr;
  ~Impl() {
    EVP_MAC_CTX_free(ctx);
    EVP_MAC_free(mac);
  }
};

namespace {

std::uint64_t mix64(std::uint64_t h) {
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ULL;
  h ^= h >> 33;
  return h;
}

// 64 bits of a multiply-and-mix hash over 8-byte words; two seeds give the 128 bits.
std::uint64_t offline_hash(std::string_view s, std::uint64_t seed) {
  std::uint64_t h = seed ^ (s.size() * 0x9E3779B97F4A7C15ULL);
  std::size_t i = 0;
  for (; i + 8 <= s.size(); i += 8) {
    std::uint64_t k;
    std::memcpy(&k, s.data() + i, 8);
    h = mix64(h ^ k) * 0x9E3779B97F4A7C15ULL;
  }
  std::uint64_t tail = 0;
  std::memcpy(&tail, s.data() + i, s.size() - i);
  return mix64(h ^ tail ^ (static_cast<std::uint64_t>(s.size() - i) << 56));
}

}  // namespace

KeyHasher::KeyHasher(std::string_view secret, Kind kind)
    : impl_(std::make_unique<Impl>()), secret_(secret), kind_(kind) {
  if (kind_ == Kind::offline) return;
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
  unsigned char out[EVP_MAX_MD_SIZE];
  std::size_t len = 0;
  if (kind_ == Kind::offline) {
    std::uint64_t a = offline_hash(material, 0x243F6A8885A308D3ULL);
    std::uint64_t b = offline_hash(material, 0x13198A2E03707344ULL);
    std::memcpy(out, &a, 8);
    std::memcpy(out + 8, &b, 8);
  } else {
    // Re-initialising with a null key keeps the key already set: no allocation per call.
    EVP_MAC_init(impl_->ctx, nullptr, 0, nullptr);
    EVP_MAC_update(impl_->ctx, reinterpret_cast<const unsigned char*>(material.data()),
                   material.size());
    EVP_MAC_final(impl_->ctx, out, &len, sizeof out);
  }
  static constexpr char digits[] = "0123456789abcdef";
  std::string hex(32, '0');
  for (std::size_t i = 0; i < 16; ++i) {
    hex[2 * i] = digits[out[i] >> 4];
    hex[2 * i + 1] = digits[out[i] & 15];
  }
  return hex;
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
      return r.client.to_string();
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
      return std::string(r.path);
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
  }
  return std::nullopt;
}

BuiltKey build_key(std::string_view prefix, const config::Route& route, const config::Limit& limit,
                   const RequestFacts& request, KeyHasher& hasher) {
  std::string material;
  for (const auto& part : limit.key) {
    auto value = part_value(part, request);
    if (!value) {
      if (limit.on_missing_key != config::OnMissingKey::shared) return BuiltKey{"", true};
      std::string key;
      key.append(prefix)
          .append(":")
          .append(route.name)
          .append(":")
          .append(limit.name)
          .append(":{shared}");
      return BuiltKey{std::move(key), true};
    }
    // kind, length, value: "ip" + "9:127.0.0.1" can never equal another split of the bytes.
    material += std::to_string(static_cast<int>(part.kind));
    material += ':';
    material += std::to_string(part.name.size());
    material += ':';
    material += part.name;
    material += std::to_string(value->size());
    material += ':';
    material += *value;
  }
  std::string key;
  key.reserve(prefix.size() + route.name.size() + limit.name.size() + 40);
  key.append(prefix).append(":").append(route.name).append(":").append(limit.name).append(":{");
  key += hasher.hex(material);
  key += '}';
  return BuiltKey{std::move(key), false};
}

}  // namespace floodgate::keys
