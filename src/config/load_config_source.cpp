// `config_source: {url, poll, public_key, cache, ca_file}`: the config comes from a url (SPEC
// "Fleet configuration"). Read here: the url, and the Ed25519 public key from its PEM file, so
// that a wrong key is an error of the local file and not a refusal of every fetched config.
// The fetching, checking and swapping are the app's ConfigFeed.
#include <openssl/evp.h>
#include <openssl/pem.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "sections.hpp"

namespace floodgate::config {

namespace {

// The Ed25519 public key in PEM file `path`, or null with `why` set.
std::shared_ptr<evp_pkey_st> read_ed25519_key(const std::string& path, std::string& why) {
  std::FILE* f = std::fopen(path.c_str(), "r");
  if (!f) {
    why = "cannot read " + path + ": " + std::strerror(errno);
    return nullptr;
  }
  EVP_PKEY* key = PEM_read_PUBKEY(f, nullptr, nullptr, nullptr);
  std::fclose(f);
  if (!key) {
    why = path + " holds no PEM public key (-----BEGIN PUBLIC KEY-----)";
    return nullptr;
  }
  std::shared_ptr<evp_pkey_st> owned(key, EVP_PKEY_free);
  if (EVP_PKEY_is_a(key, "ED25519") != 1) {
    why = path +
          " is not an Ed25519 public key (make one with: openssl genpkey -algorithm "
          "ed25519 -out signing.pem; openssl pkey -in signing.pem -pubout -out " +
          path + ")";
    return nullptr;
  }
  return owned;
}

}  // namespace

std::optional<FeedSettings> read_config_source(const Section& s) {
  auto& r = s.reader();
  if (!r.map(s.node(), s.path(), {"url", "poll", "public_key", "cache", "ca_file"}))
    return std::nullopt;
  if (!(s.require("url") & s.require("public_key"))) return std::nullopt;  // both said
  FeedSettings out;
  if (!read_https_url(s, out, "the config is")) return std::nullopt;
  s.duration("poll", out.poll, Duration(1000));
  s.string("public_key", out.public_key);
  out.public_key = r.resolve_path(out.public_key);
  std::string why;
  out.key = read_ed25519_key(out.public_key, why);
  if (!out.key) {
    r.error(s["public_key"], s.at("public_key"), why);
    return std::nullopt;
  }
  s.string("cache", out.cache);
  if (!out.cache.empty()) {
    out.cache = r.resolve_path(out.cache);
    // Said now rather than found on the day the url is down: a cache that cannot be written.
    // (A warning: --check-config may run on another host, or before the package made it.)
    const auto slash = out.cache.rfind('/');
    const auto dir = slash == std::string::npos ? std::string(".") : out.cache.substr(0, slash + 1);
    struct stat st {};
    if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
      r.warn(s["cache"], s.at("cache"),
             "the directory " + dir + " does not exist: the cache is not kept");
    else if (::access(dir.c_str(), W_OK) != 0)
      r.warn(s["cache"], s.at("cache"),
             "the directory " + dir + " is not writable by this user: the cache is not kept");
  }
  return out;
}

}  // namespace floodgate::config
