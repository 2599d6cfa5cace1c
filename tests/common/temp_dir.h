// A fresh folder under the system's temp folder (or a given one), removed with
// everything in it when the object goes.
#ifndef STEPS_TESTS_COMMON_TEMP_DIR_H_
#define STEPS_TESTS_COMMON_TEMP_DIR_H_

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

namespace steps::test_support {

class TempDir {
 public:
  TempDir() : TempDir(std::filesystem::temp_directory_path().string()) {}
  // A fresh folder inside `parent` (which exists).
  explicit TempDir(const std::string& parent) {
    std::string tmpl = parent + "/steps-test-XXXXXX";
    path_ = mkdtemp(tmpl.data());
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  // The path of `name` inside.
  std::string operator/(const std::string& name) const {
    return path_ + "/" + name;
  }
  // Writes `content` (bytes as they are) to `name` inside.
  void Write(const std::string& name, const std::string& content) const {
    std::ofstream(std::filesystem::path(path_) / name, std::ios::binary)
        << content;
  }
  // The bytes of `name` inside ("" when it cannot be read).
  std::string Read(const std::string& name) const {
    std::ifstream in(std::filesystem::path(path_) / name, std::ios::binary);
    return {std::istreambuf_iterator<char>(in),
            std::istreambuf_iterator<char>()};
  }

 private:
  std::string path_;
};

}  // namespace steps::test_support

#endif  // STEPS_TESTS_COMMON_TEMP_DIR_H_
