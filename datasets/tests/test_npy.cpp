#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "attest/core/output_files.hpp"
#include "attest/core/status.hpp"
#include "attest/datasets/npy.hpp"
#include "attest/testing/temp_dir.hpp"

namespace attest::datasets {
namespace {

namespace fs = std::filesystem;

const fs::path kFixtures = ATTEST_NPY_FIXTURES;

using attest::testing::TempDir;

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}
void spit(const fs::path& p, const std::string& bytes) {
  std::ofstream f(p, std::ios::binary);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}
std::string bytes_of(const Tensor& t) {
  return {reinterpret_cast<const char*>(t.raw()), static_cast<std::size_t>(t.numel()) * dtype_size(t.dtype())};
}

// An npy file with an arbitrary header text (version 1.0 unless given), for malformed inputs.
std::string npy_with_header(const std::string& dict, const std::string& data, int major = 1) {
  std::string out = "\x93NUMPY";
  out += static_cast<char>(major);
  out += '\0';
  const std::string header = dict + "\n";
  const int len_bytes = major == 1 ? 2 : 4;
  for (int i = 0; i < len_bytes; ++i) out += static_cast<char>((header.size() >> (8 * i)) & 0xFF);
  return out + header + data;
}

TEST(Npy, RoundTripEveryDtype) {
  const TempDir tmp("npy");
  for (DType d : {DType::f64, DType::f32, DType::f16, DType::i8, DType::u8, DType::i16, DType::u16, DType::i32,
                  DType::i64, DType::b8}) {
    Tensor t(d, {3, 1, 5});
    auto* p = reinterpret_cast<unsigned char*>(t.raw());
    const std::size_t n = static_cast<std::size_t>(t.numel()) * dtype_size(d);
    for (std::size_t i = 0; i < n; ++i) p[i] = d == DType::b8 ? static_cast<unsigned char>(i % 3 == 0) : static_cast<unsigned char>(i * 37 + 11);
    const fs::path file = tmp.path() / (std::string(dtype_name(d)) + ".npy");
    {
      OutputFiles out;
      write_npy(out, file, t);
      out.commit();
    }
    const Tensor r = read_npy(file);
    EXPECT_EQ(r.dtype(), d) << dtype_name(d);
    EXPECT_EQ(r.shape(), t.shape()) << dtype_name(d);
    EXPECT_TRUE(r.is_contiguous());
    EXPECT_EQ(bytes_of(r), bytes_of(t)) << dtype_name(d);
    // numpy's layout: data starts at a multiple of 64, header ends with '\n'.
    const std::string raw = slurp(file);
    EXPECT_EQ((raw.size() - n) % 64, 0u);
    EXPECT_EQ(raw[raw.size() - n - 1], '\n');
  }
}

TEST(Npy, ScalarEmptyAndStridedInputs) {
  const TempDir tmp("npy");
  Tensor scalar(DType::f64, {});
  *scalar.data<double>() = -1.25;
  spit(tmp.path() / "s.npy", encode_npy(scalar));
  const Tensor s = read_npy(tmp.path() / "s.npy");
  EXPECT_EQ(s.shape(), Shape{});
  EXPECT_EQ(s.get({}), -1.25);

  spit(tmp.path() / "e.npy", encode_npy(Tensor(DType::i32, {4, 0, 2})));
  EXPECT_EQ(read_npy(tmp.path() / "e.npy").shape(), (Shape{4, 0, 2}));

  Tensor m(DType::f32, {2, 3});
  for (int i = 0; i < 6; ++i) m.data<float>()[i] = static_cast<float>(i);
  const Tensor mt = m.permute({1, 0});  // [3, 2], not contiguous
  spit(tmp.path() / "t.npy", encode_npy(mt));
  const Tensor r = read_npy(tmp.path() / "t.npy");
  ASSERT_EQ(r.shape(), (Shape{3, 2}));
  for (std::int64_t i = 0; i < 3; ++i)
    for (std::int64_t j = 0; j < 2; ++j) EXPECT_EQ(r.get({i, j}), mt.get({i, j}));

  EXPECT_THROW(encode_npy(Tensor(DType::bf16, {2})), Error);
}

// Fixtures written by numpy (fixtures/npy/make_fixtures.py); values are the script's closed forms.
TEST(NpyFixtures, FloatsMatchClosedForms) {
  const Tensor a = read_npy(kFixtures / "f64_2x3x4.npy");
  ASSERT_EQ(a.dtype(), DType::f64);
  ASSERT_EQ(a.shape(), (Shape{2, 3, 4}));
  for (std::int64_t i = 0; i < 24; ++i) EXPECT_EQ(a.get({i / 12, i / 4 % 3, i % 4}), static_cast<double>(i) * 0.25 - 3);
  const Tensor b = read_npy(kFixtures / "f32_3x5.npy");
  ASSERT_EQ(b.dtype(), DType::f32);
  ASSERT_EQ(b.shape(), (Shape{3, 5}));
  for (std::int64_t i = 0; i < 15; ++i) EXPECT_EQ(b.get({i / 5, i % 5}), static_cast<double>(i) * 0.25 - 3);
  // IEEE binary16 encodings of 0, 1, -2, 0.5, 65504, 2^-24, +inf (IEEE 754-2008, table 3.5 layout).
  const Tensor h = read_npy(kFixtures / "f16_7.npy");
  ASSERT_EQ(h.dtype(), DType::f16);
  ASSERT_EQ(h.shape(), Shape{7});
  const std::uint16_t want[7] = {0x0000, 0x3C00, 0xC000, 0x3800, 0x7BFF, 0x0001, 0x7C00};
  EXPECT_EQ(std::memcmp(h.raw(), want, sizeof want), 0);
  const Tensor s = read_npy(kFixtures / "f64_scalar.npy");
  EXPECT_EQ(s.shape(), Shape{});
  EXPECT_EQ(s.get({}), 2.5);
  EXPECT_EQ(read_npy(kFixtures / "f32_empty_0x3.npy").shape(), (Shape{0, 3}));
}

TEST(NpyFixtures, IntegersAndBool) {
  auto values = [](const char* name, DType d) {
    const Tensor t = read_npy(kFixtures / name);
    EXPECT_EQ(t.dtype(), d) << name;
    std::vector<double> v;
    for (std::int64_t i = 0; i < t.dim(0); ++i) v.push_back(t.get({i}));
    return v;
  };
  EXPECT_EQ(values("i8_5.npy", DType::i8), (std::vector<double>{-128, -1, 0, 1, 127}));
  EXPECT_EQ(values("u8_3.npy", DType::u8), (std::vector<double>{0, 1, 255}));
  EXPECT_EQ(values("i16_4.npy", DType::i16), (std::vector<double>{-32768, -1, 0, 32767}));
  EXPECT_EQ(values("u16_3.npy", DType::u16), (std::vector<double>{0, 1, 65535}));
  EXPECT_EQ(values("i32_4.npy", DType::i32), (std::vector<double>{-2147483648.0, -1, 0, 2147483647.0}));
  const Tensor i64 = read_npy(kFixtures / "i64_4.npy");
  const auto* p = i64.data<std::int64_t>();
  EXPECT_EQ(p[0], std::numeric_limits<std::int64_t>::min());
  EXPECT_EQ(p[3], std::numeric_limits<std::int64_t>::max());
  const Tensor b = read_npy(kFixtures / "bool_2x2.npy");
  EXPECT_EQ(b.dtype(), DType::b8);
  EXPECT_EQ(bytes_of(b), std::string("\x01\x00\x00\x01", 4));
}

TEST(NpyFixtures, FortranOrderIsAPermutedView) {
  const Tensor a = read_npy(kFixtures / "f32_fortran_2x3.npy");
  ASSERT_EQ(a.shape(), (Shape{2, 3}));
  EXPECT_FALSE(a.is_contiguous());
  for (std::int64_t i = 0; i < 2; ++i)
    for (std::int64_t j = 0; j < 3; ++j) EXPECT_EQ(a.get({i, j}), 10.0 * i + j);
  const Tensor c = a.contiguous();
  EXPECT_EQ(c.data<float>()[1], 1.0f);  // C order after the copy
  const Tensor b = read_npy(kFixtures / "i32_fortran_2x3x4.npy");
  ASSERT_EQ(b.shape(), (Shape{2, 3, 4}));
  for (std::int64_t i = 0; i < 2; ++i)
    for (std::int64_t j = 0; j < 3; ++j)
      for (std::int64_t k = 0; k < 4; ++k) EXPECT_EQ(b.get({i, j, k}), 100.0 * i + 10.0 * j + k);
}

TEST(NpyFixtures, Versions2And3) {
  for (const char* name : {"f32_v2_4.npy", "f32_v3_4.npy"}) {
    const Tensor t = read_npy(kFixtures / name);
    ASSERT_EQ(t.shape(), Shape{4}) << name;
    for (std::int64_t i = 0; i < 4; ++i) EXPECT_EQ(t.get({i}), static_cast<double>(i + 1)) << name;
  }
}

TEST(NpyFixtures, EncodeIsByteIdenticalToNumpySave) {
  for (const char* name : {"f64_2x3x4.npy", "f32_3x5.npy", "f16_7.npy", "i8_5.npy", "u8_3.npy", "i16_4.npy", "u16_3.npy",
                           "i32_4.npy", "i64_4.npy", "bool_2x2.npy", "f64_scalar.npy", "f32_empty_0x3.npy"}) {
    EXPECT_EQ(encode_npy(read_npy(kFixtures / name)), slurp(kFixtures / name)) << name;
  }
}

// Every malformed input: attest::Error whose message starts with the file name and names the defect.
void expect_defect(const fs::path& file, const std::string& defect) {
  try {
    read_npy(file);
    ADD_FAILURE() << file << ": no error, expected '" << defect << "'";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_EQ(m.rfind(file.string() + ": ", 0), 0u) << m;
    EXPECT_NE(m.find(defect), std::string::npos) << "message: " << m << "\nexpected to contain: " << defect;
  }
}

TEST(NpyFixtures, RefusesUnsupportedDescrsByName) {
  expect_defect(kFixtures / "f4_bigendian_3.npy", "unsupported descr '>f4'");
  expect_defect(kFixtures / "c8_2.npy", "unsupported descr '<c8'");
}

TEST(Npy, MalformedFilesAreErrorsNamingFileAndDefect) {
  const TempDir tmp("npy");
  const std::string good = encode_npy(Tensor(DType::f32, {2, 3}));
  auto write = [&](const std::string& name, const std::string& bytes) {
    spit(tmp.path() / name, bytes);
    return tmp.path() / name;
  };
  const std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': ";

  expect_defect(write("truncated.npy", good.substr(0, good.size() - 1)), "truncated data");
  expect_defect(write("trailing.npy", good + "x"), "1 trailing bytes");
  std::string magic = good;
  magic[1] = 'X';
  expect_defect(write("magic.npy", magic), "bad magic");
  expect_defect(write("empty.npy", ""), "bad magic");
  expect_defect(write("short.npy", good.substr(0, 7)), "bad magic");
  std::string len = good;
  len[8] = '\xff', len[9] = '\xff';
  expect_defect(write("hlen.npy", len), "header length 65535 runs past the end of the file");
  expect_defect(write("hlen2.npy", npy_with_header(dict + "(1,), }", "abcd", 2).substr(0, 11)), "file ends inside the npy prefix");
  std::string ver = good;
  ver[6] = 4;
  expect_defect(write("version.npy", ver), "unsupported npy version 4.0");
  expect_defect(write("bigendian.npy", npy_with_header("{'descr': '>f4', 'fortran_order': False, 'shape': (1,), }", "abcd")),
                "unsupported descr '>f4'");
  expect_defect(write("object.npy", npy_with_header("{'descr': '|O', 'fortran_order': False, 'shape': (1,), }", "abcdefgh")),
                "unsupported descr '|O'");
  expect_defect(write("structured.npy", npy_with_header("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }", "abcd")),
                "structured descr");
  expect_defect(write("overflow.npy", npy_with_header(dict + "(1099511627776, 1099511627776), }", "")), "overflows the byte count");
  expect_defect(write("overflow2.npy", npy_with_header(dict + "(99999999999999999999,), }", "")), "overflows 64 bits");
  expect_defect(write("negative.npy", npy_with_header(dict + "(-1, 3), }", "")), "negative extent");
  expect_defect(write("nokey.npy", npy_with_header("{'descr': '<f4', 'shape': (1,), }", "abcd")), "lacks one of");
  expect_defect(write("extrakey.npy", npy_with_header(dict + "(1,), 'x': 1, }", "abcd")), "unexpected key 'x'");
  expect_defect(write("fortran.npy", npy_with_header("{'descr': '<f4', 'fortran_order': 0, 'shape': (1,), }", "abcd")),
                "fortran_order must be True or False");
  expect_defect(write("notuple.npy", npy_with_header(dict + "(3), }", "abcdefghijkl")), "one-element shape");
  expect_defect(write("garbage.npy", npy_with_header(dict + "(1,), } junk", "abcd")), "unexpected text after the header dict");
  expect_defect(write("bool.npy", npy_with_header("{'descr': '|b1', 'fortran_order': False, 'shape': (2,), }", std::string("\x01\x02", 2))),
                "bool element 1 is byte 2");
  expect_defect(tmp.path() / "missing.npy", "cannot read");
  // numpy's own spelling variants are accepted: no space, double quotes, no trailing comma.
  const Tensor ok = read_npy(write("variant.npy", npy_with_header("{\"shape\":(2,),\"fortran_order\":False,\"descr\":\"<i2\"}", "abcd")));
  EXPECT_EQ(ok.shape(), Shape{2});
  EXPECT_EQ(ok.dtype(), DType::i16);
}

TEST(Npy, WriteIsAllOrNothing) {
  const TempDir tmp("npy");
  const fs::path file = tmp.path() / "x.npy";
  {
    OutputFiles out;
    write_npy(out, file, Tensor(DType::f32, {4}));
    // No commit: the staged file is removed, nothing appears.
  }
  EXPECT_FALSE(fs::exists(file));
}

}  // namespace
}  // namespace attest::datasets
