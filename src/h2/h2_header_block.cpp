#include "h2_header_block.hpp"

#include <charconv>

#include "floodgate/ascii.hpp"

namespace floodgate::http {

H2HeaderBlock::H2HeaderBlock(int status) {
  add(":status", static_cast<std::uint64_t>(status));
}

void H2HeaderBlock::add(std::string_view name, std::string_view value) {
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

void H2HeaderBlock::add(std::string_view name, std::uint64_t number) {
  char digits[20];
  auto [end, ec] = std::to_chars(digits, digits + sizeof digits, number);
  add(name, std::string_view(digits, static_cast<std::size_t>(end - digits)));
}

std::span<const nghttp2_nv> H2HeaderBlock::pairs() {
  nva_.clear();
  auto* base = reinterpret_cast<std::uint8_t*>(arena_.data());
  for (const auto& e : entries_)
    nva_.push_back({base + e.name, base + e.value, e.name_len, e.value_len, NGHTTP2_NV_FLAG_NONE});
  return nva_;
}

void add_upstream_request(H2HeaderBlock& block, const RequestHead& req,
                          const config::UpstreamServer& u, bool te_trailers) {
  block.add(":method", req.method);
  block.add(":scheme", u.tls ? "https" : "http");
  block.add(":authority", req.fields.get("host"));
  block.add(":path", req.target);
  for (const auto& f : req.fields)
    if (!Fields::named(f, "host")) block.add(f.name, f.value);
  if (te_trailers) block.add("te", "trailers");
}

}  // namespace floodgate::http
