#pragma once
/// Test support: a fresh directory for one test, removed with everything in it at the end.
#include <gtest/gtest.h>

#include <stdlib.h>  // mkdtemp

#include <cerrno>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

namespace attest::testing {

/// A new empty directory `<temp>/attest_<tag>_<Suite>_<Test>_XXXXXX` (mkdtemp: unique across
/// tests, processes and runs), removed with its contents when the object goes out of scope.
/// It stands for its path: `dir / "file"`, `dir.string()`, and functions taking a path accept it.
class TempDir {
 public:
  explicit TempDir(const std::string& tag) {
    std::string name = "attest_" + tag;
    if (const auto* info = ::testing::UnitTest::GetInstance()->current_test_info())
      name += std::string("_") + info->test_suite_name() + "_" + info->name();
    for (char& c : name)  // parameterized names carry '/'; no '.' that could pass for an extension
      if (c == '/' || c == '.') c = '_';
    std::string templ = (std::filesystem::temp_directory_path() / (name + "_XXXXXX")).string();
    std::vector<char> buf(templ.begin(), templ.end());
    buf.push_back('\0');
    if (::mkdtemp(buf.data()) == nullptr)
      throw std::filesystem::filesystem_error("mkdtemp", templ, std::error_code(errno, std::generic_category()));
    path_ = buf.data();
  }
  ~TempDir() {
    std::error_code ec;  // a destructor must not throw; a leftover directory is harmless
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  [[nodiscard]] const std::filesystem::path& path() const { return path_; }
  operator const std::filesystem::path&() const { return path_; }  // NOLINT(google-explicit-constructor)
  std::filesystem::path operator/(const std::filesystem::path& sub) const { return path_ / sub; }
  [[nodiscard]] std::string string() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

}  // namespace attest::testing
