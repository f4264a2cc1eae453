// safetensors reader/writer. Hand-written framing (no Debian package reads safetensors from
// C++); the header is parsed by nlohmann-json. Every check runs before anything sized by the
// file is allocated; the data is read straight into each tensor.
#include "attest/datasets/safetensors.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <limits>
#include <set>

#include <nlohmann/json.hpp>

#include "attest/core/status.hpp"
#include "byte_source.hpp"

namespace attest::datasets {
namespace {

static_assert(std::endian::native == std::endian::little, "safetensors I/O assumes a little-endian host");

constexpr std::array<std::pair<DType, std::string_view>, 13> kNames{{
    {DType::f64, "F64"}, {DType::f32, "F32"}, {DType::f16, "F16"}, {DType::bf16, "BF16"},
    {DType::fp8_e4m3fn, "F8_E4M3"}, {DType::fp8_e5m2, "F8_E5M2"}, {DType::i8, "I8"}, {DType::u8, "U8"},
    {DType::i16, "I16"}, {DType::u16, "U16"}, {DType::i32, "I32"}, {DType::i64, "I64"}, {DType::b8, "BOOL"},
}};

std::string valid_names() {
  std::string s;
  for (const auto& [t, n] : kNames) s += (s.empty() ? "" : " ") + std::string(n);
  return s;
}

// Error texts quote file content: keep them one printable line.
std::string printable(std::string_view s, std::size_t max = 80) {
  std::string out;
  for (char c : s.substr(0, max)) out += (c >= 32 && c < 127) ? c : '?';
  if (s.size() > max) out += "...";
  return out;
}

struct Entry {
  std::string name;
  DType dtype = DType::u8;
  Shape shape;
  std::uint64_t begin = 0, end = 0;
};

std::uint64_t offset_value(const nlohmann::json& j, detail::ByteSource& src, const std::string& where) {
  if (!j.is_number_unsigned()) src.fail(where + " must be a non-negative integer, got " + printable(j.dump()));
  return j.get<std::uint64_t>();
}

Entry parse_entry(const std::string& name, const nlohmann::json& e, detail::ByteSource& src) {
  const std::string where = "tensor '" + printable(name) + "'";
  if (!e.is_object()) src.fail(where + ": entry is not an object");
  for (const auto& [k, v] : e.items())
    if (k != "dtype" && k != "shape" && k != "data_offsets")
      src.fail(where + ": unknown key '" + printable(k) + "' (valid: dtype, shape, data_offsets)");
  if (!e.contains("dtype") || !e.contains("shape") || !e.contains("data_offsets"))
    src.fail(where + ": entry lacks one of dtype, shape, data_offsets");
  Entry out;
  out.name = name;
  const auto& d = e.at("dtype");
  if (!d.is_string()) src.fail(where + ": dtype is not a string");
  const auto t = parse_safetensors_dtype(d.get_ref<const std::string&>());
  if (!t) src.fail(where + ": unsupported dtype '" + printable(d.get_ref<const std::string&>()) + "' (valid: " + valid_names() + ")");
  out.dtype = *t;
  const auto& s = e.at("shape");
  if (!s.is_array()) src.fail(where + ": shape is not an array");
  // The byte count is bounded by int64 (Tensor's element type) at every step, so no product wraps;
  // span takes empty extents as 1: an empty tensor's other extents still make its strides.
  std::uint64_t bytes = dtype_size(out.dtype), span = bytes;
  constexpr auto kMax = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
  for (const auto& x : s) {
    if (!x.is_number_unsigned()) src.fail(where + ": shape extent " + printable(x.dump()) + " is not a non-negative integer");
    const auto v = x.get<std::uint64_t>();
    if (v > kMax || (v != 0 && span > kMax / v)) src.fail(where + ": shape " + printable(s.dump()) + " overflows the byte count");
    span *= std::max<std::uint64_t>(v, 1);
    bytes *= v;
    out.shape.push_back(static_cast<std::int64_t>(v));
  }
  const auto& o = e.at("data_offsets");
  if (!o.is_array() || o.size() != 2) src.fail(where + ": data_offsets must be [begin, end]");
  out.begin = offset_value(o[0], src, where + " data_offsets begin");
  out.end = offset_value(o[1], src, where + " data_offsets end");
  if (out.end < out.begin)
    src.fail(where + ": data_offsets [" + std::to_string(out.begin) + ", " + std::to_string(out.end) + "] end before they begin");
  if (out.end - out.begin != bytes)
    src.fail(where + ": dtype " + std::string(safetensors_dtype_name(out.dtype)) + " shape " + shape_string(out.shape) +
             " needs " + std::to_string(bytes) + " bytes, data_offsets give " + std::to_string(out.end - out.begin));
  return out;
}

Safetensors read_from(detail::ByteSource& src) {
  const std::uint64_t size = src.size();
  if (size < 8) src.fail("not a safetensors file: " + std::to_string(size) + " bytes, shorter than the 8-byte header length");
  std::array<unsigned char, 8> len_bytes{};
  src.read(0, 8, len_bytes.data(), "the header length");
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | len_bytes[static_cast<std::size_t>(i)];
  if (n < 2) src.fail("header length " + std::to_string(n) + " is too small for a JSON object");
  if (n > kSafetensorsMaxHeader)
    src.fail("header length " + std::to_string(n) + " exceeds the limit of " + std::to_string(kSafetensorsMaxHeader) + " bytes");
  if (n > size - 8)
    src.fail("header length " + std::to_string(n) + " runs past the end of the file (" + std::to_string(size) + " bytes)");
  std::string text(static_cast<std::size_t>(n), '\0');
  src.read(8, text.size(), text.data(), "the header");
  if (text.front() != '{') src.fail("header does not start with '{' (starts \"" + printable(text, 16) + "\")");

  // Duplicate keys would let two readers disagree on a tensor; nesting deeper than
  // root > entry > array is never valid, so refuse it before building it.
  std::vector<std::set<std::string>> keys;
  const nlohmann::json::parser_callback_t cb = [&](int depth, nlohmann::json::parse_event_t ev, nlohmann::json& parsed) {
    using E = nlohmann::json::parse_event_t;
    if (ev == E::object_start || ev == E::array_start) {
      if (depth > 2) src.fail("header JSON nests deeper than the format allows (depth " + std::to_string(depth + 1) + ")");
      if (ev == E::object_start) keys.emplace_back();
    } else if (ev == E::object_end) {
      if (!keys.empty()) keys.pop_back();
    } else if (ev == E::key && !keys.empty()) {
      const auto& k = parsed.get_ref<const std::string&>();
      if (!keys.back().insert(k).second) src.fail("header JSON has the key '" + printable(k) + "' twice");
    }
    return true;
  };
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(text, cb);
  } catch (const nlohmann::json::exception& e) {
    src.fail("header is not well-formed JSON: " + printable(e.what(), 200));
  }
  if (!header.is_object()) src.fail("header JSON is not an object");

  Safetensors out;
  std::vector<Entry> entries;
  for (const auto& [name, value] : header.items()) {
    if (name == "__metadata__") {
      if (!value.is_object()) src.fail("__metadata__ is not an object of strings");
      for (const auto& [k, v] : value.items()) {
        if (!v.is_string()) src.fail("__metadata__ value of '" + printable(k) + "' is not a string");
        out.metadata[k] = v.get<std::string>();
      }
      continue;
    }
    entries.push_back(parse_entry(name, value, src));
  }

  const std::uint64_t data_size = size - 8 - n;
  for (const auto& e : entries)
    if (e.end > data_size)
      src.fail("tensor '" + printable(e.name) + "': data_offsets [" + std::to_string(e.begin) + ", " + std::to_string(e.end) +
               "] run past the data section of " + std::to_string(data_size) + " bytes");
  std::sort(entries.begin(), entries.end(),
            [](const Entry& a, const Entry& b) { return a.begin != b.begin ? a.begin < b.begin : a.end < b.end; });
  std::uint64_t covered = 0;
  const Entry* prev = nullptr;
  for (const auto& e : entries) {
    if (e.begin < covered)
      src.fail("tensors '" + printable(prev->name) + "' and '" + printable(e.name) + "' overlap in the data section (bytes " +
               std::to_string(e.begin) + " to " + std::to_string(std::min(covered, e.end)) + ")");
    if (e.begin > covered)
      src.fail("bytes " + std::to_string(covered) + " to " + std::to_string(e.begin) + " of the data section belong to no tensor");
    covered = e.end;
    prev = &e;
  }
  if (covered != data_size)
    src.fail(std::to_string(data_size - covered) + " trailing bytes after the last tensor's data");

  for (const auto& e : entries) {
    Tensor t(e.dtype, e.shape);
    src.read(8 + n + e.begin, static_cast<std::size_t>(e.end - e.begin), t.raw(), "the data section");
    if (e.dtype == DType::b8) {
      const auto* p = reinterpret_cast<const unsigned char*>(t.raw());
      for (std::uint64_t i = 0; i < e.end - e.begin; ++i)
        if (p[i] > 1)
          src.fail("tensor '" + printable(e.name) + "': BOOL element " + std::to_string(i) + " is byte " + std::to_string(p[i]) +
                   " (not 0 or 1)");
    }
    out.tensors.push_back({e.name, std::move(t)});
  }
  return out;
}

}  // namespace

const Tensor* Safetensors::find(std::string_view name) const {
  for (const auto& t : tensors)
    if (t.name == name) return &t.tensor;
  return nullptr;
}

std::string_view safetensors_dtype_name(DType t) {
  for (const auto& [d, n] : kNames)
    if (d == t) return n;
  throw Error("safetensors: dtype " + std::string(dtype_name(t)) + " has no safetensors name");
}

std::optional<DType> parse_safetensors_dtype(std::string_view name) {
  for (const auto& [d, n] : kNames)
    if (n == name) return d;
  return std::nullopt;
}

Safetensors read_safetensors(const std::filesystem::path& path) {
  detail::FileSource src(path);
  return read_from(src);
}

Safetensors decode_safetensors(std::span<const std::byte> bytes, const std::string& name) {
  detail::MemorySource src(bytes, name);
  return read_from(src);
}

std::string encode_safetensors(const std::vector<NamedTensor>& tensors, const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::set<std::string> seen;
  std::vector<Tensor> contiguous;
  std::uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    if (name.empty() || name == "__metadata__") throw Error("safetensors: invalid tensor name '" + name + "'");
    if (!seen.insert(name).second) throw Error("safetensors: tensor name '" + name + "' given twice");
    if (t.empty()) throw Error("safetensors: tensor '" + name + "' is empty (no storage)");
    const Tensor c = t.is_contiguous() ? t : t.contiguous();
    const std::uint64_t bytes = static_cast<std::uint64_t>(c.numel()) * dtype_size(c.dtype());
    header[name] = {{"dtype", safetensors_dtype_name(c.dtype())}, {"shape", c.shape()}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
    contiguous.push_back(c);
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::string out;
  out.reserve(8 + text.size() + offset);
  for (int i = 0; i < 8; ++i) out += static_cast<char>((static_cast<std::uint64_t>(text.size()) >> (8 * i)) & 0xFF);
  out += text;
  for (const auto& c : contiguous)
    out.append(reinterpret_cast<const char*>(c.raw()), static_cast<std::size_t>(c.numel()) * dtype_size(c.dtype()));
  return out;
}

void write_safetensors(OutputFiles& out, const std::filesystem::path& path, const std::vector<NamedTensor>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  out.stage(path, encode_safetensors(tensors, metadata));
}

}  // namespace attest::datasets
