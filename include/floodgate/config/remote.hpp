#pragma once
// What floodgate fetches over verified HTTPS: an issuer's JWKS (`jwt.jwks`) and its own config
// (`config_source`, SPEC "Fleet configuration").

#include <chrono>
#include <memory>
#include <string>

#include "floodgate/config/units.hpp"

// OpenSSL's types, kept opaque here so that users of the config need no OpenSSL headers.
struct evp_pkey_st;
struct ssl_ctx_st;

namespace floodgate::config {

// An https:// url split for the fetch, with the client context that verifies its server
// (built at load, so a bad ca_file is an error of the config).
struct HttpsUrl {
  std::string url;  // as written: https://host[:port]/path[?query]
  std::string host, port, target;
  std::string ca_file;  // empty: the system's CAs
  std::shared_ptr<ssl_ctx_st> client;
};

// `jwt.jwks`: the issuer's published keys, fetched in the background (the app's
// JwksRefresher) and chosen by a token's `kid`.
struct JwksSettings : HttpsUrl {
  Duration refresh = std::chrono::minutes(10);
};

// `config_source`: the config is fetched from `url` (a whole config with a top-level
// `version:`), signed with Ed25519 (the raw 64-byte signature at url + ".sig"), polled every
// `poll` with jitter (the app's ConfigFeed). The file that names it holds nothing else.
struct FeedSettings : HttpsUrl {
  Duration poll = std::chrono::seconds(30);
  std::string public_key;            // the PEM file, as resolved
  std::shared_ptr<evp_pkey_st> key;  // read from it at load: an Ed25519 public key
  std::string cache;                 // empty: none (a start with the url down then fails)
};

}  // namespace floodgate::config
