#pragma once
// A connection's body buffers (HTTP/2's, HTTP/3's), kept for its next stream when given back:
// a 16 KiB array in each stream's coroutine frame made every stream a malloc of 18 KB.

#include <array>
#include <cstddef>
#include <memory>
#include <vector>

namespace floodgate::http {

class ScratchPool {
 public:
  using Scratch = std::array<char, 16 * 1024>;
  std::unique_ptr<Scratch> take() {
    if (spare_.empty()) return std::make_unique<Scratch>();
    auto scratch = std::move(spare_.back());
    spare_.pop_back();
    return scratch;
  }
  void give_back(std::unique_ptr<Scratch> scratch) {
    if (spare_.size() < kSpare) spare_.push_back(std::move(scratch));
  }

 private:
  static constexpr std::size_t kSpare = 4;
  std::vector<std::unique_ptr<Scratch>> spare_;
};

}  // namespace floodgate::http
