// `refusal:`: an operator's own answer to a refused request (a branded 429 page), with the
// refusing limit's name and the wait filled in.
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "sections.hpp"

namespace floodgate::config {

namespace {

constexpr std::size_t kMaxBody = 64 * 1024;  // a page, not a site

struct Placeholder {
  std::string_view name;
  RefusalPage::Field field;
};
constexpr Placeholder kPlaceholders[] = {
    {"limit", RefusalPage::Field::limit},
    {"retry_after", RefusalPage::Field::retry_after},
    {"route", RefusalPage::Field::route},
    {"request_id", RefusalPage::Field::request_id},
};

bool is_word(std::string_view w) {
  if (w.empty() || w.size() > 32) return false;
  for (char c : w)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == '-')) return false;
  return true;
}

// Splits `text` into text pieces and the known placeholders. Any other brace is text (a page's
// CSS or a JSON body has plenty); a `{word}` that looks meant as a placeholder is returned in
// `unknown` for a warning.
void split(std::string_view text, RefusalPage& page, std::vector<std::string>& unknown) {
  std::string pending;
  while (!text.empty()) {
    auto open = text.find('{');
    if (open == std::string_view::npos) break;
    auto close = text.find('}', open + 1);
    if (close == std::string_view::npos) break;
    auto name = text.substr(open + 1, close - open - 1);
    const Placeholder* hit = nullptr;
    for (const auto& p : kPlaceholders)
      if (p.name == name) hit = &p;
    if (!hit) {
      if (is_word(name)) unknown.emplace_back(name);
      pending.append(text.substr(0, open + 1));
      text.remove_prefix(open + 1);
      continue;
    }
    pending.append(text.substr(0, open));
    if (!pending.empty()) page.body.push_back({RefusalPage::Field::text, std::move(pending)});
    pending.clear();
    page.body.push_back({hit->field, {}});
    text.remove_prefix(close + 1);
  }
  pending.append(text);
  if (!pending.empty()) page.body.push_back({RefusalPage::Field::text, std::move(pending)});
  for (const auto& p : page.body) page.body_bytes += p.text.size();
}

}  // namespace

std::shared_ptr<const RefusalPage> read_refusal(const Section& s) {
  auto& r = s.reader();
  if (!r.map(s.node(), s.path(), {"status", "content_type", "body", "file"})) return nullptr;
  const auto errors = r.error_count();
  auto page = std::make_shared<RefusalPage>();
  s.integer("status", page->status, 400, 599);
  if (s.has("content_type")) {
    s.string("content_type", page->content_type);
    // It goes into a header as written.
    for (unsigned char c : page->content_type)
      if (c < 0x20 || c == 0x7f) {
        r.error(s["content_type"], s.at("content_type"), "has a control character");
        break;
      }
  }
  std::string body;
  if (s.has("body") == s.has("file")) {
    r.error(s.node(), s.path(), "needs either body (the text) or file (a file holding it)");
  } else if (s.has("body")) {
    s.string("body", body);
  } else if (auto name = r.string(s["file"], s.at("file"))) {
    const auto file = r.resolve_path(*name);
    struct stat st {};
    std::ifstream in;
    if (::stat(file.c_str(), &st) != 0) {
      const int err = errno;
      r.error(s["file"], s.at("file"), "cannot read " + file + ": " + std::strerror(err));
    } else if (!S_ISREG(st.st_mode)) {
      // A directory reads as empty, a device or a FIFO without end.
      r.error(s["file"], s.at("file"), file + " is not a regular file");
    } else if (in.open(file, std::ios::binary); !in) {
      const int err = errno;
      r.error(s["file"], s.at("file"), "cannot read " + file + ": " + std::strerror(err));
    } else {
      body.resize(kMaxBody + 1);  // one byte more tells a file that is too long
      in.read(body.data(), static_cast<std::streamsize>(body.size()));
      body.resize(static_cast<std::size_t>(in.gcount()));
    }
  }
  if (body.size() > kMaxBody)
    r.error(s.has("file") ? s["file"] : s["body"], s.at(s.has("file") ? "file" : "body"),
            "is over 65536 bytes, the most a refusal body may be");
  std::vector<std::string> unknown;
  split(body, *page, unknown);
  for (const auto& u : unknown) {
    std::string message = "{";
    message += u;
    message +=
        "} is not a placeholder and is sent as written (placeholders: {limit}, {retry_after}, "
        "{route}, {request_id})";
    r.warn(s.has("file") ? s["file"] : s["body"], s.at(s.has("file") ? "file" : "body"), message);
  }
  if (r.error_count() != errors) return nullptr;
  return page;
}

}  // namespace floodgate::config
