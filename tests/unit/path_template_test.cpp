// Route path templates (issue 34 item 5): a path matches a template when an origin could read
// it as that endpoint. Trailing and doubled separators, encoded separators (%2F, %5C),
// ;parameters and the case of the template's literal segments do not make another endpoint;
// a different number of segments, or other text in a literal one, does.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "floodgate/config/config.hpp"

namespace {

using floodgate::config::PathTemplate;

const PathTemplate kOrders{"/api/users/{id}/orders", {"api", "users", "", "orders"}};

TEST(PathTemplate, EverySpellingOfTheEndpointMatches) {
  const std::vector<std::pair<std::string, std::string>> same = {
      {"/api/users/5/orders", "as written"},
      {"/api/users/abc-def/orders", "any id"},
      {"/api/users/5/orders/", "a trailing slash"},
      {"/api/users/5/orders%2F", "an encoded separator, as an origin that decodes it reads it"},
      {"/api/users/5/orders%2f", "in either case"},
      {"/api/users/5/orders%5C", "a backslash (IIS)"},
      {"/api/users/5%2Forders", "between segments"},
      {"/api/users/5/orders%2F%2F", "doubled"},
      {"/api/users/5/orders%2F.", "a \".\" once the separator is decoded"},
      {"/api/users/5/orders;x=1", ";parameters (Tomcat, Jetty, Spring drop them)"},
      {"/api/users/5;v=2/orders", "on the id"},
      {"/api;a/users;b/5;c/orders;d/", "on every segment"},
      {"/api/users/5/ORDERS", "a literal segment in another case (IIS, ASP.NET)"},
      {"/API/Users/5/Orders", "all of them"},
  };
  for (const auto& [path, why] : same) EXPECT_TRUE(kOrders.matches(path)) << path << ": " << why;
}

TEST(PathTemplate, OtherShapesAndTextDoNotMatch) {
  const std::vector<std::pair<std::string, std::string>> other = {
      {"/api/users//orders", "a parameter is never empty"},
      {"/api/users/;x=1/orders", "nor only a parameter"},
      {"/api/users/5/orders/7", "one segment more"},
      {"/api/users/5%2Forders%2F7", "one segment more, encoded"},
      {"/api/users/5", "one segment less"},
      {"/api/users/5/6/orders", "a parameter is one segment"},
      {"/api/users/5/orderss", "other text in a literal segment"},
      {"/api/users/5/orders.json", "a suffix is other text"},
      {"/api/users/5/orders%3Bx=1", "an encoded ';' is text, not a parameter"},
      {"api/users/5/orders", "not a path"},
      {"", "empty"},
      {"/", "the root"},
  };
  for (const auto& [path, why] : other) EXPECT_FALSE(kOrders.matches(path)) << path << ": " << why;
}

TEST(PathTemplate, ATemplateOfOneParameterMatchesOneSegment) {
  const PathTemplate t{"/{slug}", {""}};
  EXPECT_TRUE(t.matches("/a"));
  EXPECT_TRUE(t.matches("/a/"));
  EXPECT_TRUE(t.matches("/a;b"));
  EXPECT_FALSE(t.matches("/"));
  EXPECT_FALSE(t.matches("/;b"));
  EXPECT_FALSE(t.matches("/a/b"));
}

}  // namespace
