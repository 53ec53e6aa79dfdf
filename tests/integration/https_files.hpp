#pragma once
// https_files.py for a test: an HTTPS server (a certificate of the test CA for "localhost")
// answering GET /.../NAME with the file NAME of a directory of its own, with ETags. What it
// serves, whether it is down, and how often it was asked are files there.

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include "harness.hpp"
#include "test_pki.hpp"

namespace floodgate::testing {

class HttpsFiles {
 public:
  explicit HttpsFiles(TestPki& pki)
      : dir_(std::filesystem::temp_directory_path() /
             ("floodgate-https-" + std::to_string(::getpid()) + "-" + std::to_string(counter_++))),
        files_((std::filesystem::create_directories(dir_), pki.issue("localhost", {"localhost"}))),
        process_({"/usr/bin/python3", FLOODGATE_SOURCE_DIR "/tests/integration/https_files.py",
                  dir_.string(), files_.cert, files_.key}) {
    using namespace std::chrono_literals;
    auto line = process_.read_line(20s);
    port_ = line.empty() ? 0 : static_cast<std::uint16_t>(std::stoi(line));
    if (port_ == 0) ADD_FAILURE() << "the HTTPS file server did not start";
  }
  ~HttpsFiles() { std::filesystem::remove_all(dir_); }
  HttpsFiles(const HttpsFiles&) = delete;
  HttpsFiles& operator=(const HttpsFiles&) = delete;

  // `name` served as `bytes`, replaced whole (a GET never reads half a file).
  void publish(const std::string& name, std::string_view bytes) {
    std::ofstream(dir_ / (name + ".tmp"), std::ios::binary) << bytes;
    std::filesystem::rename(dir_ / (name + ".tmp"), dir_ / name);
  }
  void down(bool is_down) {
    if (is_down)
      std::ofstream(dir_ / "down") << "down";
    else
      std::filesystem::remove(dir_ / "down");
  }
  std::size_t hits() const {
    std::ifstream in(dir_ / "hits");
    std::size_t n = 0;
    for (std::string line; std::getline(in, line);) ++n;
    return n;
  }
  const std::filesystem::path& dir() const { return dir_; }
  std::string url(const std::string& path) const {
    return "https://localhost:" + std::to_string(port_) + path;
  }

 private:
  static inline int counter_ = 0;
  std::filesystem::path dir_;
  TestPki::Files files_;
  ChildProcess process_;
  std::uint16_t port_ = 0;
};

}  // namespace floodgate::testing
