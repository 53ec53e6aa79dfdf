#include "fields.hpp"

#include <algorithm>
#include <cstring>
#include <utility>

#include "floodgate/ascii.hpp"

namespace floodgate::http {

namespace {

// A typical request's or response's head fits the first block: one allocation for its text.
constexpr std::size_t kFirstBlock = 1024;
constexpr std::size_t kLink = sizeof(char*);  // a block begins with the one before it
// The most text memory cleared fields keep for the next message.
constexpr std::size_t kKeptBlock = 4 * kFirstBlock;
// The most field slots cleared fields keep (a head of thousands of tiny fields must not pin
// its table on an idle connection).
constexpr std::size_t kKeptFields = 64;

// The block before `block` (null: none), read and written as bytes: the block is a char array.
char* link_of(const char* block) {
  char* before;
  std::memcpy(&before, block, kLink);
  return before;
}
void set_link(char* block, char* before) {
  std::memcpy(block, &before, kLink);
}

}  // namespace

TextArena::~TextArena() {
  release_all_but_newest();
  delete[] newest_;
}

TextArena::TextArena(TextArena&& other) noexcept
    : newest_(std::exchange(other.newest_, nullptr)),
      cur_(std::exchange(other.cur_, nullptr)),
      left_(std::exchange(other.left_, 0)),
      newest_size_(std::exchange(other.newest_size_, 0)),
      held_(std::exchange(other.held_, 0)) {}

TextArena& TextArena::operator=(TextArena&& other) noexcept {
  if (this != &other) {
    release_all_but_newest();
    delete[] newest_;
    newest_ = std::exchange(other.newest_, nullptr);
    cur_ = std::exchange(other.cur_, nullptr);
    left_ = std::exchange(other.left_, 0);
    newest_size_ = std::exchange(other.newest_size_, 0);
    held_ = std::exchange(other.held_, 0);
  }
  return *this;
}

std::string_view TextArena::keep(std::string_view text) {
  if (text.empty()) return {};
  if (text.size() > left_) {
    const auto size = std::max({kFirstBlock, newest_size_ * 2, text.size() + kLink});
    char* block = new char[size];
    set_link(block, newest_);
    newest_ = block;
    newest_size_ = size;
    held_ += size;
    cur_ = block + kLink;
    left_ = size - kLink;
  }
  std::memcpy(cur_, text.data(), text.size());
  std::string_view kept(cur_, text.size());
  cur_ += text.size();
  left_ -= text.size();
  return kept;
}

void TextArena::release_all_but_newest() {
  if (!newest_) return;
  for (char* b = link_of(newest_); b != nullptr;) {
    char* before = link_of(b);
    delete[] b;
    b = before;
  }
  set_link(newest_, nullptr);
  held_ = newest_size_;
}

void TextArena::clear() {
  release_all_but_newest();
  // What a connection keeps between messages is bounded: one block of the usual size. A
  // larger one (a head of many kilobytes) goes, so that idle connections do not hold it.
  if (newest_ && newest_size_ > kKeptBlock) {
    delete[] newest_;
    newest_ = cur_ = nullptr;
    left_ = newest_size_ = held_ = 0;
  }
  if (newest_) {
    cur_ = newest_ + kLink;
    left_ = newest_size_ - kLink;
  }
}

bool Fields::named(const Field& f, std::string_view name) {
  return iequals(f.name, name);
}

void Fields::add(std::string_view name, std::string_view value) {
  if (fields_.empty()) fields_.reserve(16);
  fields_.push_back({text_.keep(name), text_.keep(value)});
}

void Fields::set(std::string_view name, std::string_view value) {
  erase(name);
  add(name, value);
}

std::size_t Fields::erase(std::string_view name) {
  const auto before = fields_.size();
  std::erase_if(fields_, [name](const Field& f) { return named(f, name); });
  return before - fields_.size();
}

std::optional<std::string_view> Fields::find(std::string_view name) const {
  for (const auto& f : fields_)
    if (named(f, name)) return f.value;
  return std::nullopt;
}

std::size_t Fields::count(std::string_view name) const {
  return static_cast<std::size_t>(std::count_if(fields_.begin(), fields_.end(),
                                                [name](const Field& f) { return named(f, name); }));
}

void Fields::clear() {
  if (fields_.capacity() > kKeptFields)
    std::vector<Field>().swap(fields_);
  else
    fields_.clear();
  text_.clear();
}

}  // namespace floodgate::http
