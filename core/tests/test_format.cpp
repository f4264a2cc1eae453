// The format table against two independent sources: the closed forms of each encoding family,
// and ml_dtypes' float32 value of every code (reference/oracles/make_format_oracles.py,
// mld_decode_<name>.npy; versions in provenance.json beside them).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "attest/core/format.hpp"
#include "attest/core/recipe.hpp"
#include "attest/core/status.hpp"
#include "attest/datasets/npy.hpp"

namespace attest {
namespace {

namespace fs = std::filesystem;

TEST(FormatTable, RangesFollowTheClosedForms) {
  for (FormatId f : all_format_ids()) {
    const FormatSpec& s = format_spec(f);
    SCOPED_TRACE(std::string(s.name));
    if (f == FormatId::int8) {
      EXPECT_EQ(s.max_finite, 127.0);
      EXPECT_EQ(s.bits, 8);
      continue;
    }
    if (f == FormatId::e8m0fnu) {  // exponent only: 2^(code - 127), 0xFF NaN
      EXPECT_EQ(s.max_finite, std::ldexp(1.0, 254 - 127));
      EXPECT_EQ(s.min_subnormal, std::ldexp(1.0, -127));
      continue;
    }
    const int e = s.exp_bits, m = s.man_bits;
    EXPECT_EQ(s.bits, 1 + e + m);
    // Largest exponent field usable for finite values, and its largest mantissa:
    //   IEEE-like (Inf): field 2^e - 2, full mantissa;
    //   fn with NaN (e4m3fn): field 2^e - 1, mantissa all-ones is NaN, so 2 - 2^(1-m);
    //   fnuz and the NaN-free fp6/fp4: field 2^e - 1, full mantissa.
    const int top = (1 << e) - 1;
    double want = 0;
    if (s.has_inf) want = std::ldexp(2.0 - std::ldexp(1.0, -m), top - 1 - s.bias);
    else if (s.has_nan && !s.fnuz) want = std::ldexp(2.0 - std::ldexp(1.0, 1 - m), top - s.bias);
    else want = std::ldexp(2.0 - std::ldexp(1.0, -m), top - s.bias);
    EXPECT_EQ(s.max_finite, want);
    EXPECT_EQ(s.min_normal, std::ldexp(1.0, 1 - s.bias));
    EXPECT_EQ(s.min_subnormal, std::ldexp(1.0, 1 - s.bias - m));
    EXPECT_EQ(s.fnuz, s.has_nan && !s.has_neg_zero);
    // MX emax (OCP MX v1.0 table): floor(log2(max)) of the element formats.
    if (s.emax_elem != 0) {
      EXPECT_EQ(s.emax_elem, std::ilogb(s.max_finite));
    }
  }
  // The five MX float element formats carry an emax; no other format does.
  int mx = 0;
  for (FormatId f : all_format_ids()) mx += format_spec(f).emax_elem != 0;
  EXPECT_EQ(mx, 5);
}

TEST(FormatTable, NamesParseBack) {
  for (FormatId f : all_format_ids()) EXPECT_EQ(parse_format_id(name(f)), f);
  try {
    (void)parse_format_id("fp8");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).find("unknown format 'fp8' (valid: bf16, fp16, fp8_e4m3fn"), 0u) << e.what();
  }
}

TEST(FormatTable, MatchesMlDtypesDecodingOfEveryCode) {
  const fs::path dir = ATTEST_FORMAT_ORACLE_DIR;
  if (!fs::exists(dir / "provenance.json")) GTEST_SKIP() << "no oracle vectors in " << dir;
  int checked = 0;
  for (FormatId f : all_format_ids()) {
    if (f == FormatId::f32) continue;  // no vector: float32 is the carrier itself
    const FormatSpec& s = format_spec(f);
    SCOPED_TRACE(std::string(s.name));
    const Tensor t = datasets::read_npy(dir / ("mld_decode_" + std::string(s.name) + ".npy"));
    ASSERT_EQ(t.dtype(), DType::f32);
    const float* v = t.data<float>();
    ASSERT_EQ(t.numel(), std::int64_t{1} << s.bits);
    double max = 0, min_pos = std::numeric_limits<double>::infinity();
    bool inf = false, nan = false, neg_zero = false;
    for (std::int64_t i = 0; i < t.numel(); ++i) {
      const double x = v[i];
      if (std::isnan(x)) nan = true;
      else if (std::isinf(x)) inf = true;
      else {
        max = std::max(max, x);  // the largest positive value (int8 reaches -128 but not +128)
        if (x > 0) min_pos = std::min(min_pos, x);
        if (x == 0 && std::signbit(x)) neg_zero = true;
      }
    }
    EXPECT_EQ(s.max_finite, max);
    EXPECT_EQ(s.min_subnormal, min_pos);
    EXPECT_EQ(s.has_inf, inf);
    EXPECT_EQ(s.has_nan, nan);
    EXPECT_EQ(s.has_neg_zero, neg_zero);
    // The smallest normal is the code with exponent field 1 and mantissa 0.
    if (s.exp_bits > 0 && s.man_bits > 0) {
      EXPECT_EQ(s.min_normal, v[1 << s.man_bits]);
    }
    ++checked;
  }
  EXPECT_EQ(checked, 11);
}

}  // namespace
}  // namespace attest
