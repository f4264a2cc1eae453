#pragma once
// Where a parser's bytes come from: a file (read piece by piece, so that nothing is allocated
// before the header has been validated against the real file size) or a memory buffer (the
// fuzz targets and tests). Both parsers (npy.cpp, safetensors.cpp) read only through this.
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <span>
#include <string>
#include <system_error>

#include "attest/core/status.hpp"

namespace attest::datasets::detail {

class ByteSource {
 public:
  explicit ByteSource(std::string name) : name_(std::move(name)) {}
  virtual ~ByteSource() = default;
  ByteSource(const ByteSource&) = delete;
  ByteSource& operator=(const ByteSource&) = delete;
  [[nodiscard]] virtual std::uint64_t size() const = 0;
  /// Reads [offset, offset + n) into dst; the caller has checked the range against size().
  /// Throws attest::Error "NAME: read error in WHAT".
  virtual void read(std::uint64_t offset, std::size_t n, void* dst, const char* what) = 0;
  [[nodiscard]] const std::string& name() const { return name_; }
  [[noreturn]] void fail(const std::string& defect) const { throw Error(name_ + ": " + defect); }

 private:
  std::string name_;
};

class FileSource final : public ByteSource {
 public:
  explicit FileSource(const std::filesystem::path& path) : ByteSource(path.string()) {
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec)) fail("is a directory, not a file");
    size_ = std::filesystem::file_size(path, ec);
    if (ec) fail("cannot read: " + ec.message());
    f_.open(path, std::ios::binary);
    if (!f_) fail("cannot open for reading");
  }
  [[nodiscard]] std::uint64_t size() const override { return size_; }
  void read(std::uint64_t offset, std::size_t n, void* dst, const char* what) override {
    if (n == 0) return;
    f_.clear();
    f_.seekg(static_cast<std::streamoff>(offset));
    f_.read(static_cast<char*>(dst), static_cast<std::streamsize>(n));
    if (!f_) fail(std::string("read error in ") + what);
  }

 private:
  std::ifstream f_;
  std::uint64_t size_ = 0;
};

class MemorySource final : public ByteSource {
 public:
  MemorySource(std::span<const std::byte> bytes, std::string name) : ByteSource(std::move(name)), bytes_(bytes) {}
  [[nodiscard]] std::uint64_t size() const override { return bytes_.size(); }
  void read(std::uint64_t offset, std::size_t n, void* dst, const char* what) override {
    if (offset > bytes_.size() || n > bytes_.size() - offset) fail(std::string("read error in ") + what);
    if (n) std::memcpy(dst, bytes_.data() + offset, n);
  }

 private:
  std::span<const std::byte> bytes_;
};

}  // namespace attest::datasets::detail
