// NPY reader/writer. Hand-written: no Debian C++ library reads .npy (cnpy is not packaged) and
// the format is a 10-byte prefix plus a Python dict literal.
#include "attest/datasets/npy.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <charconv>
#include <cstring>
#include <fstream>
#include <limits>
#include <optional>
#include <system_error>
#include <vector>

#include "attest/core/status.hpp"
#include "byte_source.hpp"

namespace attest::datasets {
namespace {

static_assert(std::endian::native == std::endian::little, "npy I/O assumes a little-endian host");

constexpr std::array<std::pair<DType, std::string_view>, 10> kDescrs{{
    {DType::f64, "f8"}, {DType::f32, "f4"}, {DType::f16, "f2"}, {DType::i8, "i1"}, {DType::u8, "u1"},
    {DType::i16, "i2"}, {DType::u16, "u2"}, {DType::i32, "i4"}, {DType::i64, "i8"}, {DType::b8, "b1"},
}};

[[noreturn]] void fail(const std::string& name, const std::string& defect) {
  throw Error(name + ": " + defect);
}

// Maps a descr string to a dtype. Multi-byte types must be little-endian ('<'); single-byte
// types may carry any byte-order mark ('|' is what numpy writes).
std::optional<DType> dtype_of_descr(std::string_view descr) {
  if (descr.size() != 3) return std::nullopt;
  const char order = descr[0];
  for (const auto& [t, code] : kDescrs) {
    if (descr.substr(1) != code) continue;
    const bool one_byte = dtype_size(t) == 1;
    if (order == '<' || (one_byte && (order == '|' || order == '>' || order == '='))) return t;
    return std::nullopt;
  }
  return std::nullopt;
}

struct Header {
  std::string descr;
  bool fortran_order = false;
  Shape shape;
};

// Parser of numpy's header: a Python dict literal with exactly the keys 'descr' (a string),
// 'fortran_order' (True/False) and 'shape' (a tuple of non-negative integers).
class HeaderParser {
 public:
  HeaderParser(const std::string& name, std::string_view text) : path_(name), s_(text) {}

  Header parse() {
    Header h;
    bool have_descr = false, have_order = false, have_shape = false;
    ws();
    expect('{');
    while (true) {
      ws();
      if (peek() == '}') break;
      const std::string key = string_literal();
      ws();
      expect(':');
      ws();
      if (key == "descr") {
        if (have_descr) error("key 'descr' given twice");
        if (peek() == '[') error("structured descr (a list of fields) is not supported");
        h.descr = string_literal();
        have_descr = true;
      } else if (key == "fortran_order") {
        if (have_order) error("key 'fortran_order' given twice");
        h.fortran_order = boolean();
        have_order = true;
      } else if (key == "shape") {
        if (have_shape) error("key 'shape' given twice");
        h.shape = tuple();
        have_shape = true;
      } else {
        error("unexpected key '" + key + "' (valid: descr, fortran_order, shape)");
      }
      ws();
      if (peek() == ',') {
        ++i_;
        continue;
      }
      if (peek() != '}') error("expected ',' or '}' in header dict");
    }
    ++i_;
    ws();
    if (i_ != s_.size()) error("unexpected text after the header dict");
    if (!have_descr || !have_order || !have_shape) error("header dict lacks one of descr, fortran_order, shape");
    return h;
  }

 private:
  [[noreturn]] void error(const std::string& what) const {
    fail(path_, "malformed npy header: " + what + " in \"" + printable() + "\"");
  }
  std::string printable() const {
    std::string out;
    for (char c : s_.substr(0, 120)) out += (c >= 32 && c < 127) ? c : '?';
    return out;
  }
  char peek() const { return i_ < s_.size() ? s_[i_] : '\0'; }
  void ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\n' || s_[i_] == '\t' || s_[i_] == '\r')) ++i_;
  }
  void expect(char c) {
    if (peek() != c) error(std::string("expected '") + c + "'");
    ++i_;
  }
  std::string string_literal() {
    const char q = peek();
    if (q != '\'' && q != '"') error("expected a quoted string");
    const auto end = s_.find(q, i_ + 1);
    if (end == std::string_view::npos) error("unterminated string");
    std::string out(s_.substr(i_ + 1, end - i_ - 1));
    i_ = end + 1;
    return out;
  }
  bool boolean() {
    if (s_.substr(i_, 4) == "True") {
      i_ += 4;
      return true;
    }
    if (s_.substr(i_, 5) == "False") {
      i_ += 5;
      return false;
    }
    error("fortran_order must be True or False");
  }
  Shape tuple() {
    Shape shape;
    bool comma = false;
    expect('(');
    while (true) {
      ws();
      if (peek() == ')') break;
      if (peek() == '-') fail(path_, "negative extent in shape");
      std::int64_t v = 0;
      const char* b = s_.data() + i_;
      const auto [p, ec] = std::from_chars(b, s_.data() + s_.size(), v);
      if (ec == std::errc::result_out_of_range) fail(path_, "shape extent overflows 64 bits");
      if (ec != std::errc() || p == b) error("expected an integer in shape");
      i_ += static_cast<std::size_t>(p - b);
      if (peek() == 'L') ++i_;  // Python 2 long suffix
      shape.push_back(v);
      ws();
      if (peek() == ',') {
        ++i_;
        comma = true;
        continue;
      }
      if (peek() != ')') error("expected ',' or ')' in shape");
    }
    ++i_;
    // "(5)" is an int in Python, not a tuple; numpy always writes "(5,)".
    if (shape.size() == 1 && !comma) error("one-element shape must be written '(n,)'");
    return shape;
  }

  const std::string& path_;
  std::string_view s_;
  std::size_t i_ = 0;
};

std::uint64_t le(const unsigned char* p, int n) {
  std::uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// Every read goes through `src`, whose size is the real file size: nothing sized by the header
// is allocated before the header and the data size have been checked against it.
Tensor read_npy_from(detail::ByteSource& src) {
  const std::string& path = src.name();
  const std::uintmax_t file_size = src.size();

  std::array<unsigned char, 12> pre{};
  const auto pre_len = static_cast<std::size_t>(std::min<std::uintmax_t>(file_size, pre.size()));
  src.read(0, pre_len, pre.data(), "the npy prefix");
  if (pre_len < 10 || std::memcmp(pre.data(), "\x93NUMPY", 6) != 0) fail(path, "not an npy file (bad magic)");
  const int major = pre[6], minor = pre[7];
  if ((major != 1 && major != 2 && major != 3) || minor != 0)
    fail(path, "unsupported npy version " + std::to_string(major) + "." + std::to_string(minor) + " (valid: 1.0, 2.0, 3.0)");
  const std::uintmax_t prefix = major == 1 ? 10 : 12;
  if (prefix > file_size) fail(path, "file ends inside the npy prefix");
  const std::uintmax_t header_len = le(pre.data() + 8, major == 1 ? 2 : 4);
  if (header_len > file_size - prefix)
    fail(path, "header length " + std::to_string(header_len) + " runs past the end of the file (" +
                   std::to_string(file_size) + " bytes)");

  std::string header_text(static_cast<std::size_t>(header_len), '\0');
  src.read(prefix, static_cast<std::size_t>(header_len), header_text.data(), "the npy header");
  const Header h = HeaderParser(path, header_text).parse();
  const auto dtype = dtype_of_descr(h.descr);
  if (!dtype) {
    std::string valid;
    for (const auto& [t, code] : kDescrs) valid += (valid.empty() ? "" : ", ") + std::string(dtype_size(t) == 1 ? "|" : "<") + std::string(code);
    fail(path, "unsupported descr '" + h.descr + "' (valid: " + valid + ")");
  }
  const std::uintmax_t item = dtype_size(*dtype);
  // span: the byte count with empty extents taken as 1. An empty array's other extents still
  // make its strides, which must fit in 64 bits (found by fuzz_npy).
  std::uintmax_t bytes = item, span = item;
  for (const auto e : h.shape) {
    if (e < 0) fail(path, "negative extent in shape " + shape_string(h.shape));
    const auto ue = static_cast<std::uintmax_t>(e);
    if (ue != 0 && span > static_cast<std::uintmax_t>(std::numeric_limits<std::int64_t>::max()) / ue)
      fail(path, "shape " + shape_string(h.shape) + " overflows the byte count");
    span *= std::max<std::uintmax_t>(ue, 1);
    bytes *= ue;
  }
  const std::uintmax_t have = file_size - prefix - header_len;
  if (bytes > have)
    fail(path, "truncated data: shape " + shape_string(h.shape) + " '" + h.descr + "' needs " + std::to_string(bytes) +
                   " bytes, the file has " + std::to_string(have));
  if (bytes < have)
    fail(path, std::to_string(have - bytes) + " trailing bytes after the data of shape " + shape_string(h.shape));

  // Fortran order: the bytes are the C-order array of the reversed shape.
  Shape storage_shape = h.shape;
  if (h.fortran_order) std::reverse(storage_shape.begin(), storage_shape.end());
  Tensor t(*dtype, storage_shape);
  src.read(prefix + header_len, static_cast<std::size_t>(bytes), t.raw(), "the npy data");
  if (*dtype == DType::b8) {
    const auto* p = reinterpret_cast<const unsigned char*>(t.raw());
    for (std::uintmax_t i = 0; i < bytes; ++i)
      if (p[i] > 1) fail(path, "bool element " + std::to_string(i) + " is byte " + std::to_string(p[i]) + " (not 0 or 1)");
  }
  if (h.fortran_order) {
    std::vector<int> perm(h.shape.size());
    for (std::size_t i = 0; i < perm.size(); ++i) perm[i] = static_cast<int>(perm.size() - 1 - i);
    return t.permute(perm);
  }
  return t;
}

}  // namespace

Tensor read_npy(const std::filesystem::path& path) {
  detail::FileSource src(path);
  return read_npy_from(src);
}

Tensor decode_npy(std::span<const std::byte> bytes, const std::string& name) {
  detail::MemorySource src(bytes, name);
  return read_npy_from(src);
}

std::string encode_npy(const Tensor& t) {
  if (t.empty()) throw Error("encode_npy: empty tensor");
  std::string_view code;
  for (const auto& [d, c] : kDescrs)
    if (d == t.dtype()) code = c;
  if (code.empty()) throw Error("encode_npy: dtype " + std::string(dtype_name(t.dtype())) + " has no npy descr");
  const Tensor c = t.is_contiguous() ? t : t.contiguous();

  std::string shape = "(";
  for (std::size_t i = 0; i < c.shape().size(); ++i) shape += (i ? ", " : "") + std::to_string(c.shape()[i]);
  shape += c.shape().size() == 1 ? ",)" : ")";
  std::string dict = "{'descr': '" + std::string(dtype_size(t.dtype()) == 1 ? "|" : "<") + std::string(code) +
                     "', 'fortran_order': False, 'shape': " + shape + ", }";
  // Byte-identical to np.save of numpy >= 1.24: spare spaces so that the first extent can grow
  // to 21 digits in place, then spaces and '\n' so the data starts at a multiple of 64 bytes
  // (a full 64 spaces when already aligned, as numpy's _wrap_header does).
  if (!c.shape().empty()) dict.append(21 - std::min<std::size_t>(21, std::to_string(c.shape()[0]).size()), ' ');
  std::size_t prefix = 10;
  if (dict.size() + 1 + 64 > 0xFFFF) prefix = 12;  // version 2.0: 4-byte header length
  const std::size_t pad = 64 - (prefix + dict.size() + 1) % 64;
  dict.append(pad, ' ');
  dict += '\n';
  const std::size_t header_len = dict.size();

  const auto bytes = static_cast<std::size_t>(c.numel()) * dtype_size(c.dtype());
  std::string out;
  out.reserve(prefix + header_len + bytes);
  out += "\x93NUMPY";
  out += static_cast<char>(prefix == 10 ? 1 : 2);
  out += '\0';
  for (std::size_t i = 0; i < prefix - 8; ++i) out += static_cast<char>((header_len >> (8 * i)) & 0xFF);
  out += dict;
  out.append(reinterpret_cast<const char*>(c.raw()), bytes);
  return out;
}

void write_npy(OutputFiles& out, const std::filesystem::path& path, const Tensor& t) {
  out.stage(path, encode_npy(t));
}

}  // namespace attest::datasets
