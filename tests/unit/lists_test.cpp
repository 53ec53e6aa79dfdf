// Allow and deny lists (issue 20, item 3): the CIDR set against a plain scan, the list file's
// lines and errors (named by file, line and column), and which list wins.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "fake_sources.hpp"
#include "floodgate/config/cidr_set.hpp"
#include "floodgate/config/loader.hpp"
#include "floodgate/keys/list_match.hpp"

namespace {

using namespace floodgate;
using namespace floodgate::config;

IpAddress ip(const char* text) {
  return *parse_ip(text);
}
Cidr cidr(const std::string& text) {
  return std::get<Cidr>(parse_cidr(text));
}

std::string all_of(const std::vector<Diagnostic>& ds) {
  std::string out;
  for (const auto& d : ds) out += d.to_string() + "\n";
  return out;
}

// An address near `base`: the CIDRs below are drawn around a few bases so that they nest and
// overlap, and lookups land inside, beside and between them.
IpAddress near(std::mt19937_64& rng, const IpAddress& base, int varied_bits) {
  IpAddress a = base;
  for (int bit = 128 - varied_bits; bit < 128; ++bit)
    if (rng() & 1)
      a.bytes[static_cast<std::size_t>(bit / 8)] ^= static_cast<std::uint8_t>(0x80 >> (bit % 8));
  return a;
}

TEST(CidrSet, AgreesWithAScanOfEveryCidrOnNestedAndOverlappingRanges) {
  std::mt19937_64 rng(20261202);
  const IpAddress bases[] = {ip("10.1.0.0"), ip("203.0.113.0"), ip("2001:db8::"), ip("::")};
  for (int round = 0; round < 20; ++round) {
    CidrSet set;
    std::vector<Cidr> all;
    for (int i = 0; i < 200; ++i) {
      const auto& base = bases[rng() % 4];
      const int span = base.is_v4() ? 16 : 40;
      Cidr c{near(rng, base, span), 0};
      c.prefix = static_cast<int>(128 - span + rng() % (span + 1));
      // Clear the host bits as parse_cidr does: a Cidr's network is its first address.
      c = cidr(c.network.to_string() + "/" +
               std::to_string(c.network.is_v4() ? c.prefix - 96 : c.prefix));
      set.add(c);
      all.push_back(c);
    }
    set.seal();
    EXPECT_LE(set.ranges(), all.size());
    for (int i = 0; i < 2000; ++i) {
      const auto& base = bases[rng() % 4];
      const auto a = near(rng, base, base.is_v4() ? 18 : 42);
      const bool scanned =
          std::any_of(all.begin(), all.end(), [&](const Cidr& c) { return c.contains(a); });
      ASSERT_EQ(set.contains(a), scanned) << a.to_string();
    }
  }
}

TEST(CidrSet, EdgesOfARangeAndTheWholeSpace) {
  CidrSet set;
  set.add(cidr("192.0.2.0/24"));
  set.add(cidr("192.0.2.128/25"));  // inside the /24: folded into it
  set.add(cidr("2001:db8::/32"));
  set.seal();
  EXPECT_EQ(set.ranges(), 2u);
  EXPECT_EQ(set.size(), 3u);
  EXPECT_FALSE(set.contains(ip("192.0.1.255")));
  EXPECT_TRUE(set.contains(ip("192.0.2.0")));
  EXPECT_TRUE(set.contains(ip("192.0.2.255")));
  EXPECT_FALSE(set.contains(ip("192.0.3.0")));
  EXPECT_TRUE(set.contains(ip("2001:db8:ffff:ffff:ffff:ffff:ffff:ffff")));
  EXPECT_FALSE(set.contains(ip("2001:db9::")));
  EXPECT_TRUE(set.contains(ip("::ffff:192.0.2.7")));  // IPv4-mapped is the IPv4 address

  CidrSet everything;
  everything.add(cidr("::/0"));
  everything.seal();
  EXPECT_TRUE(everything.contains(ip("0.0.0.0")));
  EXPECT_TRUE(everything.contains(ip("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff")));
  CidrSet none;
  none.seal();
  EXPECT_FALSE(none.contains(ip("10.0.0.1")));
}

class ListFile : public ::testing::Test {
 protected:
  std::filesystem::path dir_ =
      std::filesystem::temp_directory_path() / ("floodgate-lists-" + std::to_string(::getpid()));
  void SetUp() override { std::filesystem::create_directories(dir_); }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string write(const std::string& name, const std::string& text) {
    auto p = dir_ / name;
    std::ofstream(p) << text;
    return p.string();
  }
  LoadResult load(const std::string& lists, const std::string& route_lists = "") {
    auto yaml =
        "server:\n  listen: 127.0.0.1:8080\n"
        "upstreams:\n  origin: { url: \"http://127.0.0.1:9000\" }\n"
        "store: { key_secret: a-key-secret-for-the-list-tests }\n"
        "jwt: { algorithms: [HS256], hs256_secret: a-jwt-secret-for-the-list-tests-0123 }\n" +
        lists + "routes:\n  - name: r\n    match: { path_prefix: / }\n    upstream: origin\n" +
        route_lists;
    return load_config_file(write("c.yaml", yaml));
  }
};

TEST_F(ListFile, LinesAreCidrsOrPartValuesWithCommentsAndBlanks) {
  write("deny.txt",
        "# abusers, 2026-12\n"
        "203.0.113.0/24\n"
        "  198.51.100.7   # one host\n"
        "\n"
        "2001:db8::/32\r\n"
        "jwt:tenant = banned-corp\n"
        "header:X-Api-Key=leaked=key\n"
        "host=Evil.Example\n");
  auto r = load("lists:\n  deny: { cidrs: [192.0.2.0/24], file: deny.txt }\n");
  ASSERT_TRUE(r.config) << all_of(r.errors);
  const auto& deny = r.config->lists.deny;
  EXPECT_EQ(deny.cidrs.size(), 4u);
  EXPECT_EQ(deny.entries(), 7u);
  EXPECT_EQ(deny.file, (dir_ / "deny.txt").string());  // beside the config
  EXPECT_TRUE(deny.cidrs.contains(ip("198.51.100.7")));
  EXPECT_FALSE(deny.cidrs.contains(ip("198.51.100.8")));
  ASSERT_EQ(deny.values.size(), 3u);
  EXPECT_EQ(deny.values[0].part.text, "jwt:tenant");
  EXPECT_TRUE(deny.values[0].values.count("banned-corp"));
  EXPECT_EQ(deny.values[1].part.name, "x-api-key");
  EXPECT_TRUE(deny.values[1].values.count("leaked=key"));    // split at the first '='
  EXPECT_TRUE(deny.values[2].values.count("evil.example"));  // hosts compare in lower case
}

TEST_F(ListFile, BadLinesAreErrorsAtTheirLineAndColumnAfterTheConfigsOwn) {
  write("deny.txt", "10.0.0.0/8\n  10.0.0.300\nfoo=bar\nhost=\nip=10.1.1.1\n");
  auto r = load("lists:\n  deny: { file: deny.txt }\n  allow: { values: { ip: [10.0.0.1] } }\n");
  ASSERT_FALSE(r.config);
  const auto text = all_of(r.errors);
  const auto file = (dir_ / "deny.txt").string();
  EXPECT_NE(text.find(dir_.string() + "/c.yaml:9:22: lists.allow.values.ip"), std::string::npos)
      << text;
  EXPECT_NE(text.find(file + ":2:3: lists.deny.file: expected an address or CIDR"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find(file + ":3:1: lists.deny.file: unknown key part \"foo\""), std::string::npos)
      << text;
  EXPECT_NE(text.find(file + ":4:1: lists.deny.file: no value after \"host=\""), std::string::npos)
      << text;
  EXPECT_NE(text.find(file + ":5:1: lists.deny.file: \"ip\": addresses go in \"cidrs\""),
            std::string::npos)
      << text;
  // The config's own error comes first, then the file's in line order.
  ASSERT_EQ(r.errors.size(), 5u);
  EXPECT_EQ(r.errors[0].file, dir_.string() + "/c.yaml");
  EXPECT_EQ(r.errors[1].line, 2);
  EXPECT_EQ(r.errors[4].line, 5);
}

TEST_F(ListFile, AMissingFileSaysWhyAndAClaimNeedsTheJwtSection) {
  auto r = load("lists:\n  deny: { file: nowhere.txt }\n");
  ASSERT_FALSE(r.config);
  EXPECT_NE(all_of(r.errors).find("lists.deny.file: cannot read " +
                                  (dir_ / "nowhere.txt").string() + ": No such file or directory"),
            std::string::npos)
      << all_of(r.errors);

  auto no_jwt = load_config_text(
      "server:\n  listen: 127.0.0.1:8080\nupstreams:\n  origin: { url: \"http://127.0.0.1:9000\" "
      "}\n"
      "routes:\n  - name: r\n    match: { path_prefix: / }\n    upstream: origin\n"
      "    lists: { allow: { values: { \"jwt:tenant\": [internal] } } }\n",
      "c.yaml", process_env());
  ASSERT_FALSE(no_jwt.config);
  EXPECT_NE(all_of(no_jwt.errors)
                .find("routes[0].lists: names jwt:tenant but there is no \"jwt\" section"),
            std::string::npos)
      << all_of(no_jwt.errors);
}

TEST_F(ListFile, DenyWinsOverAllowAndARoutesListsAddToTheGlobalOnes) {
  auto r = load(
      "lists:\n"
      "  deny: { cidrs: [10.9.0.0/16] }\n"
      "  allow: { cidrs: [10.0.0.0/8], values: { \"jwt:tenant\": [internal] } }\n",
      "    lists: { deny: { values: { \"header:X-Api-Key\": [leaked] } } }\n");
  ASSERT_TRUE(r.config) << all_of(r.errors);
  const auto& c = *r.config;
  const auto& route = c.routes[0];
  floodgate::testing::Headers none{}, leaked{{"X-Api-Key", "leaked"}};
  floodgate::testing::Claims anyone{}, internal{{"tenant", "internal"}};
  auto check = [&](const char* client, const floodgate::testing::Headers& h,
                   const floodgate::testing::Claims& cl) {
    keys::RequestFacts f{"r", "GET", "shop.example", "/", "", ip(client), &h, &cl};
    return keys::listed(c.lists, route.lists, f);
  };
  EXPECT_EQ(check("10.1.2.3", none, anyone), keys::Listed::allowed);
  EXPECT_EQ(check("10.9.2.3", none, anyone), keys::Listed::denied);  // in both: deny
  EXPECT_EQ(check("10.9.2.3", none, internal), keys::Listed::denied);
  EXPECT_EQ(check("192.0.2.1", none, internal), keys::Listed::allowed);
  EXPECT_EQ(check("10.1.2.3", leaked, anyone), keys::Listed::denied);  // the route's deny
  EXPECT_EQ(check("192.0.2.1", none, anyone), keys::Listed::none);
  // Other routes never see this route's lists.
  EXPECT_EQ(
      keys::listed(c.lists, Lists{}, {"r", "GET", "", "/", "", ip("192.0.2.1"), &leaked, &anyone}),
      keys::Listed::none);
}

// Issue 34 item 3: a list names IPv6 addresses whole, whatever ipv6_prefix folds keys to.
TEST_F(ListFile, Ipv6ClientsAreMatchedWholeNotByTheirKeysPrefix) {
  auto r = load(
      "lists:\n"
      "  deny: { cidrs: [\"::1\", \"2001:db8:1:2::7/128\", \"::/128\"] }\n"
      "  allow: { cidrs: [\"2001:db8:9:9::/64\"] }\n");
  ASSERT_TRUE(r.config) << all_of(r.errors);
  const auto& c = *r.config;
  ASSERT_EQ(c.server.client_ip.ipv6_prefix, 64);
  floodgate::testing::Headers none{};
  floodgate::testing::Claims anyone{};
  auto check = [&](const char* client) {
    keys::RequestFacts f{"r", "GET", "", "/", "", ip(client), &none, &anyone};
    f.ipv6_prefix = c.server.client_ip.ipv6_prefix;  // as the gate sets it: keys only
    return keys::listed(c.lists, c.routes[0].lists, f);
  };
  EXPECT_EQ(check("::1"), keys::Listed::denied);
  EXPECT_EQ(check("::2"), keys::Listed::none) << "::/128 is :: alone, not ::1's /64";
  EXPECT_EQ(check("2001:db8:1:2::7"), keys::Listed::denied);
  EXPECT_EQ(check("2001:db8:1:2::8"), keys::Listed::none) << "its /64 neighbour";
  EXPECT_EQ(check("2001:db8:9:9:1:2:3:4"), keys::Listed::allowed);
}

}  // namespace
