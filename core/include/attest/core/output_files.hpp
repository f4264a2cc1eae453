#pragma once
/// All-or-nothing output: files are staged next to their destination and renamed into place only
/// when every one of them was written. A failed command leaves nothing half-written.
#include <cstddef>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

namespace attest {

class OutputFiles {
 public:
  OutputFiles() = default;
  OutputFiles(const OutputFiles&) = delete;
  OutputFiles& operator=(const OutputFiles&) = delete;
  /// Removes staged files that were never committed.
  ~OutputFiles();

  /// Stages `bytes` for `path`; throws attest::Error naming the file if it cannot be written.
  void stage(const std::filesystem::path& path, std::span<const std::byte> bytes);
  void stage(const std::filesystem::path& path, const std::string& text);
  /// Renames every staged file into place.
  void commit();

 private:
  std::vector<std::pair<std::filesystem::path, std::filesystem::path>> staged_;  // tmp, final
};

}  // namespace attest
