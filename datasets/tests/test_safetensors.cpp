// safetensors: byte layouts from the format's specification (README of huggingface/safetensors:
// 8-byte little-endian header length, JSON header, data section addressed by data_offsets),
// round trips of every dtype, and one test per validation rule with the defect it must name.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "attest/core/output_files.hpp"
#include "attest/core/status.hpp"
#include "attest/datasets/safetensors.hpp"
#include "attest/testing/temp_dir.hpp"

namespace attest::datasets {
namespace {

namespace fs = std::filesystem;

std::string le64(std::uint64_t n) {
  std::string s;
  for (int i = 0; i < 8; ++i) s += static_cast<char>((n >> (8 * i)) & 0xFF);
  return s;
}
// A file from a literal header text and data bytes.
std::string file_of(const std::string& header, const std::string& data) { return le64(header.size()) + header + data; }

Safetensors decode(const std::string& bytes) {
  return decode_safetensors(std::as_bytes(std::span(bytes.data(), bytes.size())), "x.safetensors");
}

void expect_defect(const std::string& bytes, const std::string& defect) {
  try {
    decode(bytes);
    FAIL() << "accepted a file that should fail with: " << defect;
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.rfind("x.safetensors: ", 0), 0u) << msg;
    EXPECT_NE(msg.find(defect), std::string::npos) << "message: " << msg << "\nexpected to contain: " << defect;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << "multi-line message: " << msg;
  }
}

std::string i32_bytes(std::initializer_list<std::int32_t> v) {
  std::string s;
  for (auto x : v) s.append(reinterpret_cast<const char*>(&x), 4);
  return s;
}

TEST(Safetensors, ReadsTheSpecificationExample) {
  // The README's example layout: one I32 [2, 2] tensor and string metadata.
  const std::string f = file_of(R"({"test":{"dtype":"I32","shape":[2,2],"data_offsets":[0,16]},"__metadata__":{"foo":"bar"}})",
                                i32_bytes({1, -2, 3, 2147483647}));
  const auto st = decode(f);
  ASSERT_EQ(st.tensors.size(), 1u);
  const Tensor* t = st.find("test");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->dtype(), DType::i32);
  EXPECT_EQ(t->shape(), (Shape{2, 2}));
  const auto* p = t->data<std::int32_t>();
  EXPECT_EQ(p[0], 1);
  EXPECT_EQ(p[1], -2);
  EXPECT_EQ(p[2], 3);
  EXPECT_EQ(p[3], 2147483647);
  EXPECT_EQ(st.metadata.at("foo"), "bar");
  EXPECT_EQ(st.find("nothing"), nullptr);
}

TEST(Safetensors, ToleratesHeaderPaddingAndAnyEntryOrder) {
  // Entries listed out of data order, header padded with spaces (what the reference writer does).
  std::string h = R"({"b":{"dtype":"U8","shape":[2],"data_offsets":[4,6]},"a":{"dtype":"F32","shape":[],"data_offsets":[0,4]}})";
  h.append(8 - h.size() % 8, ' ');
  const float one = 1.0f;
  std::string data(reinterpret_cast<const char*>(&one), 4);
  data += "\x07\x09";
  const auto st = decode(file_of(h, data));
  ASSERT_EQ(st.tensors.size(), 2u);
  EXPECT_EQ(st.tensors[0].name, "a");  // data-offset order
  EXPECT_EQ(st.find("a")->shape(), Shape{});
  EXPECT_EQ(*st.find("a")->data<float>(), 1.0f);
  EXPECT_EQ(st.find("b")->data<std::uint8_t>()[1], 9);
}

TEST(Safetensors, WriterLayoutIsTheSpecificationsLayout) {
  Tensor t(DType::i32, {2});
  t.data<std::int32_t>()[0] = 5;
  t.data<std::int32_t>()[1] = -1;
  const std::string bytes = encode_safetensors({{"x", t}}, {{"k", "v"}});
  std::string h = R"({"__metadata__":{"k":"v"},"x":{"dtype":"I32","shape":[2],"data_offsets":[0,8]}})";
  h.append((8 - h.size() % 8) % 8, ' ');
  EXPECT_EQ(bytes, file_of(h, i32_bytes({5, -1})));
}

TEST(Safetensors, RoundTripEveryDtype) {
  const std::vector<DType> all{DType::f64, DType::f32,  DType::f16, DType::bf16, DType::fp8_e4m3fn, DType::fp8_e5m2, DType::i8,
                               DType::u8,  DType::i16, DType::u16, DType::i32, DType::i64,        DType::b8};
  std::vector<NamedTensor> in;
  for (std::size_t i = 0; i < all.size(); ++i) {
    Tensor t(all[i], {2, static_cast<std::int64_t>(i) + 1});
    auto* p = reinterpret_cast<unsigned char*>(t.raw());
    const auto n = static_cast<std::size_t>(t.numel()) * dtype_size(all[i]);
    for (std::size_t b = 0; b < n; ++b) p[b] = all[i] == DType::b8 ? static_cast<unsigned char>(b & 1) : static_cast<unsigned char>(b * 37 + i);
    in.push_back({"t" + std::to_string(i), t});
  }
  in.push_back({"empty", Tensor(DType::f32, {0, 3})});
  // A strided (transposed) view is written in C order of its logical shape.
  Tensor base(DType::i16, {2, 3});
  for (int i = 0; i < 6; ++i) base.data<std::int16_t>()[i] = static_cast<std::int16_t>(i);
  in.push_back({"transposed", base.permute({1, 0})});
  const std::map<std::string, std::string> meta{{"recipe", "bf16"}, {"layout", "bshd"}};
  const auto st = decode(encode_safetensors(in, meta));
  EXPECT_EQ(st.metadata, meta);
  ASSERT_EQ(st.tensors.size(), in.size());
  for (std::size_t i = 0; i + 1 < in.size(); ++i) {
    const Tensor* t = st.find(in[i].name);
    ASSERT_NE(t, nullptr) << in[i].name;
    EXPECT_EQ(t->dtype(), in[i].tensor.dtype()) << in[i].name;
    EXPECT_EQ(t->shape(), in[i].tensor.shape()) << in[i].name;
    const auto n = static_cast<std::size_t>(t->numel()) * dtype_size(t->dtype());
    EXPECT_EQ(std::memcmp(t->raw(), in[i].tensor.raw(), n), 0) << in[i].name;
  }
  const Tensor* tr = st.find("transposed");
  ASSERT_NE(tr, nullptr);
  EXPECT_EQ(tr->shape(), (Shape{3, 2}));
  const std::vector<std::int16_t> want{0, 3, 1, 4, 2, 5};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(tr->data<std::int16_t>()[i], want[static_cast<std::size_t>(i)]);
}

TEST(Safetensors, FileRoundTripAndMissingFile) {
  const attest::testing::TempDir dir("st");
  Tensor t(DType::f32, {3});
  t.data<float>()[2] = 2.5f;
  {
    OutputFiles out;
    write_safetensors(out, dir / "a.safetensors", {{"v", t}});
    out.commit();
  }
  const auto st = read_safetensors(dir / "a.safetensors");
  EXPECT_EQ(st.find("v")->data<float>()[2], 2.5f);
  EXPECT_THROW(read_safetensors(dir / "missing.safetensors"), Error);
  EXPECT_THROW(read_safetensors(dir), Error);
}

TEST(Safetensors, WriterRefusals) {
  const Tensor t(DType::f32, {1});
  EXPECT_THROW(encode_safetensors({{"a", t}, {"a", t}}), Error);
  EXPECT_THROW(encode_safetensors({{"", t}}), Error);
  EXPECT_THROW(encode_safetensors({{"__metadata__", t}}), Error);
  EXPECT_THROW(encode_safetensors({{"a", Tensor()}}), Error);
}

const std::string kOk = R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})";

TEST(SafetensorsMalformed, Framing) {
  expect_defect("", "shorter than the 8-byte header length");
  expect_defect("abc", "shorter than the 8-byte header length");
  expect_defect(le64(1) + "{", "too small for a JSON object");
  expect_defect(le64(100'000'001) + "{}", "exceeds the limit");
  expect_defect(le64(~std::uint64_t{0}) + "{}", "exceeds the limit");
  expect_defect(le64(50) + "{}", "runs past the end of the file");
  expect_defect(file_of("[1,2]", ""), "does not start with '{'");
  expect_defect(file_of(" {}", ""), "does not start with '{'");
}

TEST(SafetensorsMalformed, Json) {
  expect_defect(file_of("{\"a\":", ""), "not well-formed JSON");
  expect_defect(file_of("{} x", ""), "not well-formed JSON");
  expect_defect(file_of("{\"\xff\":1}", ""), "not well-formed JSON");
  expect_defect(file_of(R"({"a":{"dtype":"U8","shape":[],"data_offsets":[0,1]},"a":{"dtype":"U8","shape":[],"data_offsets":[1,2]}})", "ab"),
                "key 'a' twice");
  expect_defect(file_of(R"({"a":{"shape":[[[1]]]}})", ""), "nests deeper");
  expect_defect(file_of(R"({"a":[1]})", ""), "entry is not an object");
  expect_defect(file_of(R"({"__metadata__":{"k":1}})", ""), "__metadata__ value of 'k' is not a string");
  expect_defect(file_of(R"({"__metadata__":[]})", ""), "__metadata__ is not an object");
}

TEST(SafetensorsMalformed, Entries) {
  const std::string d4(4, '\0');
  expect_defect(file_of(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"x":1}})", d4), "unknown key 'x'");
  expect_defect(file_of(R"({"a":{"dtype":"F32","shape":[1]}})", d4), "lacks one of dtype, shape, data_offsets");
  expect_defect(file_of(R"({"a":{"dtype":"C64","shape":[1],"data_offsets":[0,4]}})", d4), "unsupported dtype 'C64'");
  expect_defect(file_of(R"({"a":{"dtype":7,"shape":[1],"data_offsets":[0,4]}})", d4), "dtype is not a string");
  expect_defect(file_of(R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", d4), "not a non-negative integer");
  expect_defect(file_of(R"({"a":{"dtype":"F32","shape":[1.0],"data_offsets":[0,4]}})", d4), "not a non-negative integer");
  expect_defect(file_of(R"({"a":{"dtype":"F32","shape":4,"data_offsets":[0,4]}})", d4), "shape is not an array");
  expect_defect(file_of(R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,4]}})", d4),
                "overflows the byte count");
  expect_defect(file_of(R"({"a":{"dtype":"F32","shape":[18446744073709551615],"data_offsets":[0,4]}})", d4),
                "overflows the byte count");
  expect_defect(file_of(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0]}})", d4), "must be [begin, end]");
  expect_defect(file_of(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,0]}})", d4), "end before they begin");
  expect_defect(file_of(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})", d4), "needs 8 bytes, data_offsets give 4");
  expect_defect(file_of(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[-4,0]}})", d4), "non-negative integer");
}

TEST(SafetensorsMalformed, Offsets) {
  const std::string d8(8, '\0');
  expect_defect(file_of(kOk, ""), "run past the data section of 0 bytes");
  expect_defect(file_of(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[18446744073709551608,18446744073709551612]}})", d8),
                "run past the data section");
  expect_defect(file_of(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[2,6]}})", d8),
                "'a' and 'b' overlap");
  expect_defect(file_of(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", d8), "bytes 0 to 4 of the data section belong to no tensor");
  expect_defect(file_of(kOk, d8), "4 trailing bytes");
  expect_defect(file_of(R"({"a":{"dtype":"BOOL","shape":[2],"data_offsets":[0,2]}})", std::string("\x01\x02", 2)),
                "BOOL element 1 is byte 2");
}

}  // namespace
}  // namespace attest::datasets
