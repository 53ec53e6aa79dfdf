#pragma once
// What a test needs from the machine beyond the build: an external tool (nghttpd, promtool,
// chromium) or headroom (file descriptors). Where it is missing the test proves nothing: a
// developer's run skips it and says what to install; CI's run (CI=true) fails it instead,
// because CI installs everything (scripts/install-deps.sh) and a skip would pass silently.

#include <gtest/gtest.h>

#include <string>

namespace floodgate::testing {

// The first executable `name` on PATH, else in the sbin directories a Debian user's PATH
// leaves out (nghttpd is installed in /usr/sbin); empty when it is in neither.
std::string find_tool(const std::string& name);

// This is CI's run: CI=true in the environment (.ci/run sets it).
bool in_ci();

}  // namespace floodgate::testing

// Ends the test (it returns from the test's body): a failure in CI, else a skip. `why` is
// streamed, so it may be `"a" << n << "b"`.
#define FLOODGATE_CANNOT_RUN(why)                                                  \
  do {                                                                             \
    if (::floodgate::testing::in_ci())                                             \
      FAIL() << why << " (CI=true: a test that cannot run fails here, not skips)"; \
    GTEST_SKIP() << why;                                                           \
  } while (0)

// Ends the test as FLOODGATE_CANNOT_RUN does when tool `name` (a string literal) from Debian
// package `package` is not installed.
#define FLOODGATE_REQUIRE_TOOL(name, package)                                \
  do {                                                                       \
    if (::floodgate::testing::find_tool(name).empty())                       \
      FLOODGATE_CANNOT_RUN(name " is not installed (Debian package " package \
                                "; scripts/install-deps.sh installs it)");   \
  } while (0)
