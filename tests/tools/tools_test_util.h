// A scratch tree for tool tests: root/ is the sandbox, outside/ sits next to
// it holding a secret that no tool may reach.
#ifndef STEPS_TESTS_TOOLS_TOOLS_TEST_UTIL_H_
#define STEPS_TESTS_TOOLS_TOOLS_TEST_UTIL_H_

#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace steps {

class ScratchTree {
 public:
  ScratchTree() {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "steps-tools-XXXXXX")
            .string();
    base_ = std::filesystem::canonical(mkdtemp(pattern.data())).string();
    std::filesystem::create_directory(root());
    std::filesystem::create_directory(outside());
    Write(outside() + "/secret.txt", "secret");
  }
  ~ScratchTree() { std::filesystem::remove_all(base_); }

  std::string root() const { return base_ + "/root"; }
  std::string outside() const { return base_ + "/outside"; }

  static void Write(const std::string& path, const std::string& content) {
    std::filesystem::create_directories(
        std::filesystem::path(path).parent_path());
    std::ofstream(path, std::ios::binary) << content;
  }
  static std::string Read(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  static void Symlink(const std::string& target, const std::string& link) {
    std::filesystem::create_symlink(target, link);
  }

 private:
  std::string base_;
};

}  // namespace steps

#endif  // STEPS_TESTS_TOOLS_TOOLS_TEST_UTIL_H_
