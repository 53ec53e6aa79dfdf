#include "header_block.hpp"

#include <charconv>

namespace floodgate::http {

HeaderBlock::HeaderBlock(int status) {
  add(":status", static_cast<std::uint64_t>(status));
}

void HeaderBlock::add(std::string_view name, std::string_view value) {
  Entry e{static_cast<std::uint32_t>(arena_.size()), static_cast<std::uint32_t>(name.size()), 0,
          static_cast<std::uint32_t>(value.size())};
  if (arena_.empty()) arena_.reserve(256);  // one allocation for a typical block
  arena_ += name;
  for (auto i = e.name; i < arena_.size(); ++i)  // ASCII only: names are tokens
    if (arena_[i] >= 'A' && arena_[i] <= 'Z') arena_[i] = static_cast<char>(arena_[i] + 32);
  e.value = static_cast<std::uint32_t>(arena_.size());
  arena_ += value;
  entries_.push_back(e);
}

void HeaderBlock::add(std::string_view name, std::uint64_t number) {
  char digits[20];
  auto [end, ec] = std::to_chars(digits, digits + sizeof digits, number);
  add(name, std::string_view(digits, static_cast<std::size_t>(end - digits)));
}

}  // namespace floodgate::http
