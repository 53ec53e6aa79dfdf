#pragma once
// A message's header fields as every protocol hands them to the exchange and takes them back:
// in the order received, names as received (HTTP/2's lower-case, HTTP/1.1's as the sender
// wrote them), found by name in any case. HTTP/1.1's parser, HTTP/2's header callbacks and
// (next) HTTP/3's fill one; the driver rewrites it; each protocol's writer serializes it. No
// protocol library's type appears here.
//
// The text lives in blocks that never move: a view of a name, a value or kept text stays
// valid until the Fields is cleared or destroyed, through later adds, sets and erases, and
// through a move. The exchange's facts (method, target, Host as received) are such views,
// and outlive the rewrite of the head for the upstream.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace floodgate::http {

// Text copied into blocks of memory that stay where they are (see above).
class TextArena {
 public:
  TextArena() = default;
  ~TextArena();
  TextArena(TextArena&& other) noexcept;
  TextArena& operator=(TextArena&& other) noexcept;
  TextArena(const TextArena&) = delete;
  TextArena& operator=(const TextArena&) = delete;

  // A stable copy of `text`.
  std::string_view keep(std::string_view text);
  // Bytes of memory its blocks take.
  std::size_t held() const { return held_; }
  // Forgets everything kept; the newest block is kept for what comes next unless it is
  // larger than a usual head needs.
  void clear();

 private:
  void release_all_but_newest();

  char* newest_ = nullptr;  // a block; its first bytes point at the block before it
  char* cur_ = nullptr;     // the free part of the newest block
  std::size_t left_ = 0;
  std::size_t newest_size_ = 0;
  std::size_t held_ = 0;
};

struct Field {
  std::string_view name;
  std::string_view value;
};

class Fields {
 public:
  Fields() = default;
  Fields(Fields&&) noexcept = default;
  Fields& operator=(Fields&&) noexcept = default;
  Fields(const Fields&) = delete;
  Fields& operator=(const Fields&) = delete;

  // Appends a field (a repeated name is kept repeated, in order).
  void add(std::string_view name, std::string_view value);
  // Replaces every field named `name` with one, at the end.
  void set(std::string_view name, std::string_view value);
  // Removes every field named `name`; how many there were.
  std::size_t erase(std::string_view name);
  // Removes the i-th field.
  void erase_at(std::size_t i) { fields_.erase(fields_.begin() + static_cast<std::ptrdiff_t>(i)); }

  // The value of the first field named `name`.
  std::optional<std::string_view> find(std::string_view name) const;
  // That value, or "" when there is none.
  std::string_view get(std::string_view name) const { return find(name).value_or(""); }
  bool has(std::string_view name) const { return find(name).has_value(); }
  std::size_t count(std::string_view name) const;
  // Calls fn(value) for every field named `name`, in order.
  template <class Fn>
  void each(std::string_view name, Fn&& fn) const {
    for (const auto& f : fields_)
      if (named(f, name)) fn(f.value);
  }

  std::size_t size() const { return fields_.size(); }
  bool empty() const { return fields_.empty(); }
  std::string_view name(std::size_t i) const { return fields_[i].name; }
  std::string_view value(std::size_t i) const { return fields_[i].value; }
  const Field& operator[](std::size_t i) const { return fields_[i]; }
  auto begin() const { return fields_.begin(); }
  auto end() const { return fields_.end(); }

  // A stable copy of text that belongs with these fields (a start line's parts).
  std::string_view keep(std::string_view text) { return text_.keep(text); }
  // Bytes of memory it holds (text blocks and its table of fields).
  std::size_t held() const { return text_.held() + fields_.capacity() * sizeof(Field); }
  // Empty again, its memory kept for the next message (up to a usual head's: what an idle
  // connection holds stays small whatever its last message was).
  void clear();

  static bool named(const Field& f, std::string_view name);

 private:
  std::vector<Field> fields_;
  TextArena text_;
};

// A request's head: its start line's parts (views into `fields`' text) and its fields.
struct RequestHead {
  std::string_view method;
  std::string_view target;
  unsigned version = 11;  // 10, 11; 20 for HTTP/2
  Fields fields;

  void set_method(std::string_view m) { method = fields.keep(m); }
  void set_target(std::string_view t) { target = fields.keep(t); }
};

// A response's head.
struct ResponseHead {
  int status = 0;
  std::string_view reason;  // as received (empty: the status's usual one)
  unsigned version = 11;
  Fields fields;
};

}  // namespace floodgate::http
