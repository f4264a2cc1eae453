#include "attest/core/output_files.hpp"

#include <fstream>
#include <system_error>
#include <unistd.h>

#include "attest/core/status.hpp"

namespace attest {

OutputFiles::~OutputFiles() {
  std::error_code ec;
  for (const auto& [tmp, dst] : staged_) std::filesystem::remove(tmp, ec);
}

void OutputFiles::stage(const std::filesystem::path& path, std::span<const std::byte> bytes) {
  auto tmp = path;
  tmp += ".attest-tmp-" + std::to_string(::getpid());
  std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
  if (!f) throw Error(path.string() + ": cannot open for writing");
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  f.close();
  if (!f) {
    std::error_code ec;
    std::filesystem::remove(tmp, ec);
    throw Error(path.string() + ": write failed (disk full?)");
  }
  staged_.emplace_back(tmp, path);
}

void OutputFiles::stage(const std::filesystem::path& path, const std::string& text) {
  stage(path, std::as_bytes(std::span(text.data(), text.size())));
}

void OutputFiles::commit() {
  for (const auto& [tmp, dst] : staged_) {
    std::error_code ec;
    std::filesystem::rename(tmp, dst, ec);
    if (ec) throw Error(dst.string() + ": cannot move into place: " + ec.message());
  }
  staged_.clear();
}

}  // namespace attest
