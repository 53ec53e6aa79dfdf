// Loading `config_source` and `version:` (SPEC "Fleet configuration"): the local file names
// only its source, with an Ed25519 public key read at load; a fetched config must carry a
// version and cannot name a source of its own; its relative paths start at the local file's
// directory.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "floodgate/config/loader.hpp"

namespace floodgate::config {
namespace {

const char* kEd25519 =
    "-----BEGIN PUBLIC KEY-----\n"
    "MCowBQYDK2VwAyEA24oW2mNz30NyzwO8ryitM7ra9oFhVosIHkrKKWvQ46E=\n"
    "-----END PUBLIC KEY-----\n";
const char* kP256 =
    "-----BEGIN PUBLIC KEY-----\n"
    "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE80QCdTb6NawU1MygCT44/fSjQqL5\n"
    "tRA7i6jUswC9LCLNdN8lsYQ3gLL4JH046NCHDJeMsbSqFZ0TF558B2UNNg==\n"
    "-----END PUBLIC KEY-----\n";

struct Dir {
  std::filesystem::path path = std::filesystem::temp_directory_path() /
                               ("floodgate-feed-unit-" + std::to_string(::getpid()));
  Dir() {
    std::filesystem::create_directories(path);
    std::ofstream(path / "signing.pub") << kEd25519;
    std::ofstream(path / "ec.pub") << kP256;
  }
  ~Dir() { std::filesystem::remove_all(path); }
  std::string file(const std::string& name) const { return (path / name).string(); }
};

LoadResult load(const std::string& yaml, const std::string& name) {
  return load_config_text(yaml, name, [](const std::string&) { return std::nullopt; });
}

std::string all_errors(const LoadResult& r) {
  std::string out;
  for (const auto& e : r.errors) out += e.to_string() + "\n";
  return out;
}

TEST(ConfigFeedLoad, ALocalFileNamesItsSourceAndItsKeyIsReadRelativeToIt) {
  Dir dir;
  auto r = load(
      "config_source:\n  url: https://config.example/floodgate/fra1.yaml?token=s3cret\n"
      "  poll: 45s\n  public_key: signing.pub\n  cache: last-good.yaml\n",
      dir.file("floodgate.yaml"));
  ASSERT_TRUE(r.config) << all_errors(r);
  ASSERT_TRUE(r.config->feed);
  const auto& f = *r.config->feed;
  EXPECT_EQ(f.host, "config.example");
  EXPECT_EQ(f.port, "443");
  EXPECT_EQ(f.target, "/floodgate/fra1.yaml?token=s3cret");
  EXPECT_EQ(f.poll, std::chrono::seconds(45));
  EXPECT_EQ(f.public_key, dir.file("signing.pub"));
  EXPECT_TRUE(f.key);
  EXPECT_EQ(f.cache, dir.file("last-good.yaml"));
  const auto summary = summarize(*r.config);
  EXPECT_NE(summary.find("fra1.yaml?token=***"), std::string::npos) << summary;
  EXPECT_EQ(summary.find("s3cret"), std::string::npos) << summary;
}

TEST(ConfigFeedLoad, EachMistakeInTheSourceIsNamedAtItsPlace) {
  Dir dir;
  const auto name = dir.file("floodgate.yaml");
  struct Case {
    std::string yaml, expected;
  };
  for (const auto& c : {
           Case{"config_source: { url: \"http://config.example/a.yaml\", public_key: signing.pub }",
                ":1:23: config_source.url: expected https://HOST[:PORT]/PATH (the config is "
                "fetched over verified TLS)"},
           Case{"config_source: { url: \"https://config.example/a.yaml\" }",
                ":1:16: config_source: \"public_key\" is required"},
           Case{"config_source: { url: \"https://c.example/a\", public_key: ec.pub }",
                "is not an Ed25519 public key"},
           Case{"config_source: { url: \"https://c.example/a\", public_key: missing.pub }",
                "cannot read " + dir.file("missing.pub")},
           Case{"config_source: { url: \"https://c.example/a\", public_key: signing.pub }\n"
                "server: { listen: [127.0.0.1:0] }\n",
                ":2:1: server: beside config_source: a file that names config_source holds "
                "nothing else"},
           Case{"version: -3\nserver: { listen: [127.0.0.1:0] }\n", ":1:10: version:"},
       }) {
    auto r = load(c.yaml, name);
    EXPECT_FALSE(r.config) << c.yaml;
    EXPECT_NE(all_errors(r).find(c.expected), std::string::npos) << c.yaml << "\n" << all_errors(r);
  }
}

constexpr const char* kServed =
    "server: { listen: [127.0.0.1:0] }\nupstreams: { o: { url: \"http://127.0.0.1:1\" } }\n"
    "store: { key_secret: k }\nrefusal: { file: refused.json }\n"
    "routes: [{ name: r, match: { path_prefix: / }, upstream: o }]\n";

TEST(ConfigFeedLoad, AFetchedConfigHasAVersionAndItsPathsStartAtTheLocalDirectory) {
  Dir dir;
  std::ofstream(dir.path / "refused.json") << R"({"error":"slow down"})";
  const auto none = [](const std::string&) { return std::nullopt; };
  std::string doc = "version: 7\n";
  doc.append(kServed);
  auto r = load_fetched_config(doc, "https://c.example/fra1.yaml", dir.path.string(), none);
  ASSERT_TRUE(r.config) << all_errors(r);
  EXPECT_EQ(r.config->version, 7);
  EXPECT_EQ(r.config->source, "https://c.example/fra1.yaml");
  EXPECT_EQ(r.config->sha256.size(), 64u);

  auto unversioned =
      load_fetched_config(kServed, "https://c.example/fra1.yaml", dir.path.string(), none);
  EXPECT_NE(all_errors(unversioned)
                .find("https://c.example/fra1.yaml:1:1: version: \"version\" "
                      "is required of a config fetched from config_source"),
            std::string::npos)
      << all_errors(unversioned);
  auto nested = load_fetched_config(
      "version: 8\nconfig_source: { url: \"https://c.example/b\", public_key: signing.pub }\n",
      "https://c.example/fra1.yaml", dir.path.string(), none);
  EXPECT_NE(all_errors(nested).find("cannot name a config_source of its own"), std::string::npos)
      << all_errors(nested);
}

}  // namespace
}  // namespace floodgate::config
