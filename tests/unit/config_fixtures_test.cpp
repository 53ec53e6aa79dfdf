// Every file in tests/unit/config/fixtures is a config with deliberate errors. Its leading
// comment lines say what floodgate must report:
//
//   # expect: LINE:COL: substring-of-message
//
// (line and column 1-based, as in Diagnostic::to_string()). The loader must refuse the file,
// report exactly as many errors as there are expectations, and each expectation must match
// a different reported error.

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "floodgate/config/loader.hpp"

namespace fs = std::filesystem;
using floodgate::config::Diagnostic;
using floodgate::config::EnvLookup;
using floodgate::config::load_config_text;

namespace {

struct Expectation {
  int line = 0;
  int column = 0;
  std::string substring;
  std::string text;  // the comment as written, for messages
};

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<Expectation> expectations_of(const std::string& text) {
  static const std::regex re(R"(^# expect: (\d+):(\d+): (.+?)\s*$)");
  std::vector<Expectation> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("# expect:", 0) != 0) continue;
    std::smatch m;
    if (!std::regex_match(line, m, re)) {
      ADD_FAILURE() << "malformed expectation line: " << line;
      continue;
    }
    out.push_back({std::stoi(m[1]), std::stoi(m[2]), m[3], line});
  }
  return out;
}

bool satisfies(const Diagnostic& d, const Expectation& e) {
  return d.line == e.line && d.column == e.column &&
         d.message.find(e.substring) != std::string::npos;
}

// Bipartite matching (expectation -> distinct error), so that two expectations can never be
// satisfied by the same error and the order of reporting does not matter.
bool assign(std::size_t e, const std::vector<std::vector<bool>>& ok, std::vector<int>& owner,
            std::vector<bool>& seen) {
  for (std::size_t d = 0; d < owner.size(); ++d) {
    if (!ok[e][d] || seen[d]) continue;
    seen[d] = true;
    if (owner[d] < 0 || assign(static_cast<std::size_t>(owner[d]), ok, owner, seen)) {
      owner[d] = static_cast<int>(e);
      return true;
    }
  }
  return false;
}

// Only a couple of variables exist: anything else is "not set".
EnvLookup fixture_env() {
  return [](const std::string& name) -> std::optional<std::string> {
    static const std::map<std::string, std::string> vars{{"SET_VAR", "value"},
                                                         {"OTHER_VAR", "other-value"}};
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

std::vector<std::string> fixture_files() {
  std::vector<std::string> out;
  fs::path dir(FLOODGATE_FIXTURES);
  if (!fs::is_directory(dir)) return out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_regular_file() && (e.path().extension() == ".yaml" || e.path().extension() == ".yml"))
      out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

class ConfigFixture : public ::testing::TestWithParam<std::string> {};

TEST_P(ConfigFixture, ReportsExactlyTheExpectedErrors) {
  const std::string name = GetParam();
  const std::string text = read_file(fs::path(FLOODGATE_FIXTURES) / name);
  const auto expected = expectations_of(text);
  ASSERT_FALSE(expected.empty()) << name << " has no \"# expect: LINE:COL: text\" line";

  auto result = load_config_text(text, name, fixture_env());

  std::string reported;
  for (const auto& d : result.errors) reported += "\n  " + d.to_string();
  if (reported.empty()) reported = "\n  (none)";

  EXPECT_EQ(result.config, nullptr) << name << ": a config with errors must yield no snapshot";
  EXPECT_EQ(result.errors.size(), expected.size())
      << name << ": wrong number of errors; reported:" << reported;
  for (const auto& d : result.errors) EXPECT_EQ(d.file, name) << d.to_string();

  std::vector<std::vector<bool>> ok(expected.size(), std::vector<bool>(result.errors.size()));
  for (std::size_t e = 0; e < expected.size(); ++e)
    for (std::size_t d = 0; d < result.errors.size(); ++d)
      ok[e][d] = satisfies(result.errors[d], expected[e]);
  std::vector<int> owner(result.errors.size(), -1);
  for (std::size_t e = 0; e < expected.size(); ++e) {
    std::vector<bool> seen(result.errors.size(), false);
    EXPECT_TRUE(assign(e, ok, owner, seen)) << name << ": no distinct reported error matches\n  "
                                            << expected[e].text << "\nreported:" << reported;
  }
}

std::string test_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string out;
  for (char c : info.param.substr(0, info.param.rfind('.')))
    out += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return out;
}

INSTANTIATE_TEST_SUITE_P(Fixtures, ConfigFixture, ::testing::ValuesIn(fixture_files()), test_name);

// Guards against the directory going missing or the glob silently finding nothing.
TEST(ConfigFixtures, DirectoryHoldsTheErrorCases) {
  auto files = fixture_files();
  EXPECT_GE(files.size(), 20u) << "fixtures directory: " << FLOODGATE_FIXTURES;
  for (const char* required :
       {"unknown_key_server_lisen.yaml", "three_errors.yaml", "invalid_yaml_syntax.yaml",
        "unset_env_var.yaml", "jwt_algorithm_none.yaml"})
    EXPECT_NE(std::find(files.begin(), files.end(), required), files.end()) << required;
}

TEST(ConfigFixtures, ThreeErrorFixtureExpectsThreeErrors) {
  auto expected = expectations_of(read_file(fs::path(FLOODGATE_FIXTURES) / "three_errors.yaml"));
  ASSERT_EQ(expected.size(), 3u);
  // in three different places
  EXPECT_NE(expected[0].line, expected[1].line);
  EXPECT_NE(expected[1].line, expected[2].line);
  EXPECT_NE(expected[0].line, expected[2].line);
}

TEST(Diagnostic, ToStringIsFileLineColumnMessage) {
  Diagnostic d{"conf/floodgate.yaml", 12, 7, "server.listen: bad"};
  EXPECT_EQ(d.to_string(), "conf/floodgate.yaml:12:7: server.listen: bad");
}

TEST(Diagnostic, LoaderReportsOneBasedPositions) {
  // "lisen" is on the second line, indented by two: 2:3 in 1-based terms.
  auto r = load_config_text("server:\n  lisen: 0.0.0.0:80\n", "x.yaml", fixture_env());
  ASSERT_FALSE(r.errors.empty());
  bool found = false;
  for (const auto& d : r.errors)
    if (d.message.find("unknown key \"lisen\"") != std::string::npos) {
      found = true;
      EXPECT_EQ(d.line, 2);
      EXPECT_EQ(d.column, 3);
      EXPECT_EQ(d.to_string().rfind("x.yaml:2:3: unknown key \"lisen\"", 0), 0u) << d.to_string();
    }
  EXPECT_TRUE(found);
}

}  // namespace
