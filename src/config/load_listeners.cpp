// server.listen: addresses, TLS certificates (loaded and checked here) and protocols.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "floodgate/tls/contexts.hpp"
#include "floodgate/tls/quic_credentials.hpp"
#include "sections.hpp"

namespace floodgate::config {
namespace {

// A listener's `protocols`: h2 needs TLS (ALPN), h2c a plain listener (prior knowledge), h3
// TLS (QUIC has no plain form) and a TCP protocol beside it (Alt-Svc is how clients find it).
std::vector<Protocol> protocols(YamlReader& r, const Section& s, bool tls) {
  std::vector<Protocol> out;
  if (!s.has("protocols")) {
    if (tls) return {Protocol::h2, Protocol::http1};
    return {Protocol::http1};
  }
  for (const auto& item : r.sequence(s["protocols"], s.at("protocols"))) {
    std::string name = item.IsScalar() ? item.Scalar() : "";
    std::optional<Protocol> p;
    if (name == "http1") p = Protocol::http1;
    if (name == "h2") p = Protocol::h2;
    if (name == "h2c") p = Protocol::h2c;
    if (name == "h3") p = Protocol::h3;
    if (!p) {
      r.error(item, s.at("protocols"), "expected http1, h2, h2c or h3, got \"" + name + "\"");
      continue;
    }
    if (*p == Protocol::h2 && !tls)
      r.error(item, s.at("protocols"),
              "h2 is HTTP/2 over TLS (ALPN): this listener has no tls; h2c is HTTP/2 with prior "
              "knowledge on a plain listener");
    else if (*p == Protocol::h3 && !tls)
      r.error(item, s.at("protocols"),
              "h3 is HTTP/3 over QUIC, which is always TLS 1.3: this listener has no tls");
    else if (*p == Protocol::h2c && tls)
      r.error(item, s.at("protocols"),
              "h2c is HTTP/2 with prior knowledge on a plain listener: with tls, use h2");
    else if (std::find(out.begin(), out.end(), *p) != out.end())
      r.error(item, s.at("protocols"), "\"" + name + "\" is listed twice");
    else
      out.push_back(*p);
  }
  if (out.empty() && s["protocols"].IsSequence() && s["protocols"].size() == 0)
    r.error(s["protocols"], s.at("protocols"), "at least one protocol is required");
  if (!out.empty() &&
      std::all_of(out.begin(), out.end(), [](Protocol p) { return p == Protocol::h3; }))
    r.error(s["protocols"], s.at("protocols"),
            "h3 needs http1 or h2 beside it: clients learn of HTTP/3 from the Alt-Svc of a TCP "
            "answer");
  if (out.empty()) out.push_back(Protocol::http1);  // an error was reported: nothing is served
  return out;
}

}  // namespace

std::optional<Endpoint> read_endpoint(YamlReader& r, const YAML::Node& n, const std::string& path) {
  return r.parsed<Endpoint>(n, path, parse_endpoint);
}

std::optional<Listener> read_listener(YamlReader& r, const YAML::Node& n, const std::string& path,
                                      bool grpc_only) {
  if (n.IsScalar()) {
    auto ep = read_endpoint(r, n, path);
    if (!ep) return std::nullopt;
    return Listener{*ep, std::nullopt, {grpc_only ? Protocol::h2c : Protocol::http1}};
  }
  Section s(r, n, path);
  if (!(grpc_only ? r.map(n, path, {"address", "tls"})
                  : r.map(n, path, {"address", "tls", "protocols"})) ||
      !s.require("address"))
    return std::nullopt;
  auto ep = read_endpoint(r, s["address"], s.at("address"));
  if (!ep) return std::nullopt;
  Listener l{*ep, std::nullopt, {}};
  if (s.has("tls")) {
    Section t(r, s["tls"], s.at("tls"));
    if (!r.map(t.node(), t.path(), {"certificates", "min_version"})) return l;
    TlsSettings tls;
    std::vector<tls::Certificate> loaded_certs;
    t.choice<std::string>("min_version", tls.min_version, {{"1.2", "1.2"}, {"1.3", "1.3"}});
    if (t.require("certificates")) {
      auto certs = r.sequence(t["certificates"], t.at("certificates"));
      for (std::size_t i = 0; i < certs.size(); ++i) {
        Section c(r, certs[i], t.at("certificates") + "[" + std::to_string(i) + "]");
        if (!r.map(c.node(), c.path(), {"cert", "key"})) continue;
        TlsCertificate cert;
        if (c.require("cert")) c.string("cert", cert.cert);
        if (c.require("key")) c.string("key", cert.key);
        if (cert.cert.empty() || cert.key.empty()) continue;
        cert.cert = r.resolve_path(cert.cert);
        cert.key = r.resolve_path(cert.key);
        tls.certificates.push_back(cert);
        auto loaded = tls::load_certificate(cert.cert, cert.key, tls.min_version);
        if (auto* e = std::get_if<tls::CertificateError>(&loaded)) {
          const char* field = e->file == tls::CertificateError::File::cert ? "cert" : "key";
          r.error(c[field], c.at(field), e->message);
          continue;
        }
        auto& ok = std::get<tls::Certificate>(loaded);
        if (ok.expired)
          r.warn(c["cert"], c.at("cert"),
                 "certificate " + cert.cert + " expired on " + ok.not_after + " (served anyway)");
        loaded_certs.push_back(std::move(ok));
      }
      if (certs.empty() && t["certificates"].IsSequence())
        r.error(t["certificates"], t.at("certificates"), "at least one certificate is required");
    }
    l.protocols = grpc_only ? std::vector<Protocol>{Protocol::h2} : protocols(r, s, true);
    std::vector<std::string> alpn;  // TCP's: h3 is QUIC's own ALPN
    for (auto p : l.protocols)
      if (p != Protocol::h3) alpn.emplace_back(p == Protocol::h2 ? "h2" : "http/1.1");
    if (!loaded_certs.empty() && loaded_certs.size() == tls.certificates.size()) {
      tls.contexts =
          std::make_shared<const tls::ServerContexts>(std::move(loaded_certs), std::move(alpn));
      if (l.speaks(Protocol::h3)) {
        std::vector<tls::QuicCredentials::Files> files;
        for (const auto& c : tls.certificates) files.push_back({c.cert, c.key});
        auto quic = tls::QuicCredentials::load(files, tls.contexts);
        if (auto* e = std::get_if<tls::CertificateError>(&quic))
          r.error(t["certificates"], t.at("certificates"), e->message);
        else
          tls.quic = std::get<std::shared_ptr<const tls::QuicCredentials>>(std::move(quic));
      }
    }
    l.tls = tls;
  } else {
    l.protocols = grpc_only ? std::vector<Protocol>{Protocol::h2c} : protocols(r, s, false);
  }
  return l;
}

}  // namespace floodgate::config
