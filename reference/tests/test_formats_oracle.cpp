// The codecs against vectors made by ml_dtypes, numpy and PyTorch
// (reference/oracles/make_format_oracles.py; provenance.json beside the vectors says which
// versions). Skipped while the vectors are absent.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "attest/datasets/npy.hpp"
#include "attest/reference/formats.hpp"

namespace attest::ref {
namespace {

namespace fs = std::filesystem;

const fs::path kDir = ATTEST_FORMAT_ORACLE_DIR;

bool have_vectors() { return fs::exists(kDir / "provenance.json") && fs::exists(kDir / "inputs_f32.npy"); }

std::vector<float> read_f32(const fs::path& p) {
  const Tensor t = datasets::read_npy(p);
  if (t.dtype() != DType::f32) throw Error(p.string() + ": expected float32");
  return {t.data<float>(), t.data<float>() + t.numel()};
}

std::vector<std::uint16_t> read_codes(const fs::path& p) {
  const Tensor t = datasets::read_npy(p);
  if (t.dtype() == DType::u8) return {t.data<std::uint8_t>(), t.data<std::uint8_t>() + t.numel()};
  if (t.dtype() == DType::u16) return {t.data<std::uint16_t>(), t.data<std::uint16_t>() + t.numel()};
  throw Error(p.string() + ": expected uint8 or uint16 codes");
}

// NaN codes are compared as a class where FORMATS.md says implementations pick different NaN
// bit patterns (bf16, fp16, e5m2: payload and quiet-bit choices); the sign must still agree
// unless `ignore_nan_sign` (CUDA casts drop it).
bool same_code(FormatId f, std::uint16_t a, std::uint16_t b, bool ignore_nan_sign) {
  if (a == b) return true;
  if (!is_nan_code(f, a) || !is_nan_code(f, b)) return false;
  const int sign_shift = format_info(f).bits - 1;
  return ignore_nan_sign || ((a >> sign_shift) == (b >> sign_shift));
}

std::string describe(FormatId f, float x, std::uint16_t want, std::uint16_t got) {
  char b[160];
  std::snprintf(b, sizeof b, "%s x=%a (bits 0x%08X) oracle 0x%X attest 0x%X", std::string(format_name(f)).c_str(),
                static_cast<double>(x), std::bit_cast<std::uint32_t>(x), want, got);
  return b;
}

TEST(FormatOracleVectors, EncodeMatchesMlDtypes) {
  if (!have_vectors()) GTEST_SKIP() << "no oracle vectors in " << kDir << " (run make_format_oracles.py)";
  const std::vector<float> x = read_f32(kDir / "inputs_f32.npy");
  ASSERT_GT(x.size(), 1000u);
  for (FormatId f : all_formats()) {
    const std::vector<std::uint16_t> want = read_codes(kDir / ("mld_encode_" + std::string(format_name(f)) + ".npy"));
    ASSERT_EQ(want.size(), x.size()) << format_name(f);
    std::size_t bad = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
      // The default modes (rne, ieee) are ml_dtypes' casts for every format, e8m0fnu included.
      const std::uint16_t got = encode(f, x[i]);
      if (!same_code(f, want[i], got, false) && ++bad <= 10) ADD_FAILURE() << describe(f, x[i], want[i], got);
    }
    EXPECT_EQ(bad, 0u) << format_name(f);
  }
}

// E8M0 alone, on a dense set (every power of two and tie 1.5 * 2^e with neighbours, FP32
// subnormals, both signs, zero, Inf, NaN, max): the scalar and the batch encoders, and the CLI's
// default, equal ml_dtypes.float8_e8m0fnu on every input.
TEST(FormatOracleVectors, E8m0DenseMatchesMlDtypes) {
  if (!fs::exists(kDir / "inputs_e8m0_f32.npy")) GTEST_SKIP() << "no dense e8m0 vector in " << kDir;
  const std::vector<float> x = read_f32(kDir / "inputs_e8m0_f32.npy");
  const std::vector<std::uint16_t> want = read_codes(kDir / "mld_encode_e8m0fnu_dense.npy");
  ASSERT_EQ(want.size(), x.size());
  std::vector<std::uint8_t> batch(x.size());
  encode_f32(FormatId::e8m0fnu, x, batch);
  std::size_t bad = 0, subnormal = 0, ties = 0, nonpositive = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const std::uint16_t got = encode(FormatId::e8m0fnu, x[i]);
    if ((got != want[i] || batch[i] != want[i]) && ++bad <= 10)
      ADD_FAILURE() << describe(FormatId::e8m0fnu, x[i], want[i], got) << " batch 0x" << std::hex << int(batch[i]);
    const float a = std::fabs(x[i]);
    subnormal += x[i] > 0 && a < 0x1p-126f;
    ties += x[i] > 0 && std::isfinite(a) && a / std::exp2(std::floor(std::log2(a))) == 1.5f;
    nonpositive += !(x[i] > 0);
  }
  EXPECT_EQ(bad, 0u);
  // The vector reaches what it is for (numbers of the committed one).
  EXPECT_GE(subnormal, 16000u);
  EXPECT_GE(ties, 270u);
  EXPECT_GE(nonpositive, x.size() / 2);
}

TEST(FormatOracleVectors, EncodeMatchesTorchFp8Casts) {
  if (!have_vectors()) GTEST_SKIP() << "no oracle vectors in " << kDir;
  const std::vector<float> x = read_f32(kDir / "inputs_f32.npy");
  int files = 0;
  for (const char* dev : {"cpu", "cuda"}) {
    for (FormatId f : {FormatId::fp8_e4m3fn, FormatId::fp8_e5m2, FormatId::fp8_e4m3fnuz, FormatId::fp8_e5m2fnuz}) {
      const fs::path p = kDir / ("torch_" + std::string(dev) + "_encode_" + std::string(format_name(f)) + ".npy");
      if (!fs::exists(p)) continue;
      ++files;
      const std::vector<std::uint16_t> want = read_codes(p);
      ASSERT_EQ(want.size(), x.size()) << p;
      std::size_t bad = 0;
      for (std::size_t i = 0; i < x.size(); ++i) {
        const std::uint16_t got = encode(f, x[i]);
        if (!same_code(f, want[i], got, true) && ++bad <= 10) ADD_FAILURE() << dev << " " << describe(f, x[i], want[i], got);
      }
      EXPECT_EQ(bad, 0u) << p;
    }
  }
  if (files == 0) GTEST_SKIP() << "the vectors were made without torch";
}

TEST(FormatOracleVectors, DecodeMatchesMlDtypes) {
  if (!have_vectors()) GTEST_SKIP() << "no oracle vectors in " << kDir;
  for (FormatId f : all_formats()) {
    const std::vector<float> want = read_f32(kDir / ("mld_decode_" + std::string(format_name(f)) + ".npy"));
    ASSERT_EQ(want.size(), code_count(f)) << format_name(f);
    for (std::uint32_t c = 0; c < code_count(f); ++c) {
      const float got = decode(f, static_cast<std::uint16_t>(c));
      if (std::isnan(want[c])) {
        EXPECT_TRUE(std::isnan(got)) << format_name(f) << " code " << c;
      } else {
        EXPECT_EQ(std::bit_cast<std::uint32_t>(got), std::bit_cast<std::uint32_t>(want[c]))
            << format_name(f) << " code " << c << " want " << want[c] << " got " << got;
      }
    }
  }
}

}  // namespace
}  // namespace attest::ref
