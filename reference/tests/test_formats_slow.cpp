// Dense sweeps (label `slow`): every float32 in and around each small format's range through
// the batch encoder, against the oracle's exact double-table search (format_oracle.hpp); every
// float32 through bf16 against the RNE formula of FORMATS.md.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "attest/reference/formats.hpp"
#include "format_oracle.hpp"

namespace attest::ref {
namespace {

using test::FormatOracle;

// Encodes float bit patterns [lo, hi] (stepping by `step`) in chunks through encode_f32 and
// compares each with the oracle. Returns the number of mismatches (the first few are reported).
std::size_t sweep(const FormatOracle& o, std::uint32_t lo, std::uint32_t hi, std::uint32_t step, Rounding r,
                  Overflow ov, bool negate) {
  const FormatId f = o.format();
  constexpr std::size_t kChunk = 1 << 20;
  std::vector<float> x;
  std::vector<std::uint16_t> c(kChunk);
  x.reserve(kChunk);
  std::size_t bad = 0;
  std::uint64_t b = lo;
  while (b <= hi) {
    x.clear();
    for (; b <= hi && x.size() < kChunk; b += step) {
      const float v = std::bit_cast<float>(static_cast<std::uint32_t>(b));
      x.push_back(negate ? -v : v);
    }
    encode_f32(f, x, std::span<std::uint16_t>(c.data(), x.size()), r, ov);
    for (std::size_t i = 0; i < x.size(); ++i) {
      const std::uint16_t want = o.encode_dbl(x[i], r, ov);
      if (c[i] != want && ++bad <= 10)
        ADD_FAILURE() << format_name(f) << " x=" << std::hexfloat << x[i] << " " << attest::name(r) << " "
                      << attest::name(ov) << " want " << want << " got " << c[i];
    }
  }
  return bad;
}

std::uint32_t fbits(double v) { return std::bit_cast<std::uint32_t>(static_cast<float>(v)); }

// All floats from 1/16 of the smallest subnormal to 4x the first value past max.
void sweep_small_format(FormatId f) {
  const FormatOracle o(f);
  const double lo = f == FormatId::int8 ? 0x1p-3 : format_info(f).min_subnormal / 16;
  const std::uint32_t blo = fbits(lo), bhi = fbits(o.values_dbl().back() * 4);
  EXPECT_EQ(sweep(o, blo, bhi, 1, Rounding::rne, Overflow::ieee, false), 0u);
  EXPECT_EQ(sweep(o, blo, bhi, 3, Rounding::rne, Overflow::ieee, true), 0u);
  EXPECT_EQ(sweep(o, blo, bhi, 3, Rounding::rne, Overflow::sat_cuda, false), 0u);
  EXPECT_EQ(sweep(o, blo, bhi, 5, Rounding::rne, Overflow::sat_hip, true), 0u);
  EXPECT_EQ(sweep(o, blo, bhi, 7, Rounding::away, Overflow::ieee, true), 0u);
  EXPECT_EQ(sweep(o, blo, bhi, 11, Rounding::smaller, Overflow::ieee, false), 0u);
}

TEST(FormatSweep, Fp8E4m3fn) { sweep_small_format(FormatId::fp8_e4m3fn); }
TEST(FormatSweep, Fp8E5m2) { sweep_small_format(FormatId::fp8_e5m2); }
TEST(FormatSweep, Fp8E4m3fnuz) { sweep_small_format(FormatId::fp8_e4m3fnuz); }
TEST(FormatSweep, Fp8E5m2fnuz) { sweep_small_format(FormatId::fp8_e5m2fnuz); }
TEST(FormatSweep, Fp6E2m3fn) { sweep_small_format(FormatId::fp6_e2m3fn); }
TEST(FormatSweep, Fp6E3m2fn) { sweep_small_format(FormatId::fp6_e3m2fn); }
TEST(FormatSweep, Fp4E2m1fn) { sweep_small_format(FormatId::fp4_e2m1fn); }
TEST(FormatSweep, Int8) { sweep_small_format(FormatId::int8); }

TEST(FormatSweep, E8m0fnuAllPositiveFloatsStrided) {
  const FormatOracle o(FormatId::e8m0fnu);
  for (Rounding r : {Rounding::rne, Rounding::away, Rounding::smaller})
    EXPECT_EQ(sweep(o, 1, 0x7F800000u, 97, r, Overflow::ieee, false), 0u);
  EXPECT_EQ(sweep(o, 0, 0x7F800000u, 1009, Rounding::rne, Overflow::sat_cuda, true), 0u);
  // Every float near the ties 1.5 * 2^e of a few binades, all roundings.
  for (int e : {-127, -126, -1, 0, 1, 126, 127})
    for (Rounding r : {Rounding::rne, Rounding::away, Rounding::smaller})
      EXPECT_EQ(sweep(o, fbits(std::ldexp(1.4, e)), fbits(std::ldexp(1.6, e)), 1, r, Overflow::ieee, false), 0u);
}

TEST(FormatSweep, Fp16AgainstOracle) {
  const FormatOracle o(FormatId::fp16);
  const std::uint32_t blo = fbits(0x1p-28), bhi = fbits(0x1p18);
  EXPECT_EQ(sweep(o, blo, bhi, 1, Rounding::rne, Overflow::ieee, false), 0u);
  EXPECT_EQ(sweep(o, blo, bhi, 13, Rounding::rne, Overflow::sat_cuda, true), 0u);
  EXPECT_EQ(sweep(o, blo, bhi, 17, Rounding::away, Overflow::ieee, true), 0u);
}

// FORMATS.md: FP32 -> BF16 is (b + 0x7FFF + ((b >> 16) & 1)) >> 16 for every non-NaN float.
TEST(FormatSweep, Bf16EveryFloatAgainstFormula) {
  constexpr std::size_t kChunk = 1 << 22;
  std::vector<float> x(kChunk);
  std::vector<std::uint16_t> c(kChunk);
  std::size_t bad = 0;
  for (std::uint64_t base = 0; base < (1ull << 32); base += kChunk) {
    for (std::size_t i = 0; i < kChunk; ++i) x[i] = std::bit_cast<float>(static_cast<std::uint32_t>(base + i));
    encode_f32(FormatId::bf16, x, c);
    for (std::size_t i = 0; i < kChunk; ++i) {
      const auto b = static_cast<std::uint32_t>(base + i);
      const bool nan = (b & 0x7FFFFFFFu) > 0x7F800000u;
      const bool ok = nan ? ((c[i] & 0x7FFF) > 0x7F80 && (c[i] >> 15) == (b >> 31))
                          : c[i] == static_cast<std::uint16_t>((b + 0x7FFFu + ((b >> 16) & 1u)) >> 16);
      if (!ok && ++bad <= 10) ADD_FAILURE() << "bf16 bits " << std::hex << b << " got " << c[i];
    }
  }
  EXPECT_EQ(bad, 0u);
}

}  // namespace
}  // namespace attest::ref
