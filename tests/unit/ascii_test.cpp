// floodgate::iequals reads exactly the bytes of its two views (Beast 1.81's iequals read one
// past their end when they differed only in case: the ASan build of this test catches that).
#include <gtest/gtest.h>

#include <cstring>
#include <memory>

#include "floodgate/ascii.hpp"

namespace {

// The text in a heap block of exactly its size: no terminator or neighbour to read by mistake.
std::unique_ptr<char[]> exact(const char* text) {
  auto block = std::make_unique<char[]>(std::strlen(text));
  std::memcpy(block.get(), text, std::strlen(text));
  return block;
}

TEST(Ascii, IequalsIgnoresCaseAndReadsOnlyItsViews) {
  auto a = exact("Bearer"), b = exact("bearer");
  EXPECT_TRUE(floodgate::iequals({a.get(), 6}, {b.get(), 6}));
  auto c = exact("BeareR"), d = exact("bearex");
  EXPECT_FALSE(floodgate::iequals({c.get(), 6}, {d.get(), 6}));
  EXPECT_FALSE(floodgate::iequals("chunked", "chunke"));
  EXPECT_TRUE(floodgate::iequals("", ""));
  // Only ASCII letters fold: bytes past 0x7f compare as themselves.
  EXPECT_FALSE(floodgate::iequals("\xc4", "\xe4"));
  EXPECT_TRUE(floodgate::iequals("100-CONTINUE", "100-continue"));
}

}  // namespace
