// Element format codecs against the exact-rational oracle (format_oracle.hpp), hand examples
// from FORMATS.md, and packing examples worked out by hand from the documented bit order.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "attest/core/status.hpp"
#include "attest/reference/formats.hpp"
#include "format_oracle.hpp"

namespace attest::ref {
namespace {

using test::FormatOracle;

constexpr Rounding kRoundings[] = {Rounding::rne, Rounding::away, Rounding::smaller};
constexpr Overflow kOverflows[] = {Overflow::ieee, Overflow::sat_cuda, Overflow::sat_hip};

std::string hex(unsigned v) {
  char b[16];
  std::snprintf(b, sizeof b, "0x%X", v);
  return b;
}
std::string ctx(FormatId f, double x, Rounding r, Overflow o) {
  char b[64];
  std::snprintf(b, sizeof b, "%a", x);
  return std::string(format_name(f)) + " x=" + b + " " + std::string(attest::name(r)) + " " +
         std::string(attest::name(o));
}

const FormatOracle& oracle(FormatId f) {
  static const std::vector<FormatOracle> all = [] {
    std::vector<FormatOracle> v;
    for (FormatId g : all_formats()) v.emplace_back(g);
    return v;
  }();
  return all.at(static_cast<std::size_t>(f));
}

// ---------------------------------------------------------------------------------------------
// Names and table.

TEST(FormatNames, RoundTripAndErrors) {
  const char* expected[] = {"bf16", "fp16", "fp8_e4m3fn", "fp8_e5m2", "fp8_e4m3fnuz", "fp8_e5m2fnuz",
                            "fp6_e2m3fn", "fp6_e3m2fn", "fp4_e2m1fn", "e8m0fnu", "int8"};
  ASSERT_EQ(all_formats().size(), std::size(expected));
  for (std::size_t i = 0; i < all_formats().size(); ++i) {
    EXPECT_EQ(format_name(all_formats()[i]), expected[i]);
    EXPECT_EQ(parse_format(expected[i]), all_formats()[i]);
  }
  for (Rounding r : kRoundings) EXPECT_EQ(parse_rounding(attest::name(r)), r);
  for (Overflow o : kOverflows) EXPECT_EQ(parse_overflow(attest::name(o)), o);
  EXPECT_EQ(attest::name(Rounding::away), "away");
  EXPECT_EQ(attest::name(Overflow::sat_cuda), "sat_cuda");
  try {
    parse_format("fp8_e4m3");
    FAIL() << "no throw";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("fp8_e4m3"), std::string::npos);
    EXPECT_NE(m.find("fp8_e4m3fnuz"), std::string::npos);
    EXPECT_NE(m.find("int8"), std::string::npos);
  }
  EXPECT_THROW(parse_rounding("nearest"), Error);
  EXPECT_THROW(parse_overflow("saturate"), Error);
}

// The FORMATS.md table, typed in by hand.
TEST(FormatSpec, MatchesSpecTable) {
  struct Row { FormatId f; int bits; double max, min_normal, min_sub; bool inf, nan, negz; int emax; };
  const Row rows[] = {
      {FormatId::fp8_e4m3fn, 8, 448, 0x1p-6, 0x1p-9, false, true, true, 8},
      {FormatId::fp8_e5m2, 8, 57344, 0x1p-14, 0x1p-16, true, true, true, 15},
      {FormatId::fp8_e4m3fnuz, 8, 240, 0x1p-7, 0x1p-10, false, true, false, 0},
      {FormatId::fp8_e5m2fnuz, 8, 57344, 0x1p-15, 0x1p-17, false, true, false, 0},
      {FormatId::fp6_e2m3fn, 6, 7.5, 1, 0.125, false, false, true, 2},
      {FormatId::fp6_e3m2fn, 6, 28, 0.25, 0.0625, false, false, true, 4},
      {FormatId::fp4_e2m1fn, 4, 6, 1, 0.5, false, false, true, 2},
      {FormatId::e8m0fnu, 8, 0x1p127, 0x1p-127, 0x1p-127, false, true, false, 0},
      {FormatId::bf16, 16, 3.3895313892515355e38, 0x1p-126, 0x1p-133, true, true, true, 0},
      {FormatId::fp16, 16, 65504, 0x1p-14, 0x1p-24, true, true, true, 0},
      {FormatId::int8, 8, 127, 1, 1, false, false, false, 0},
  };
  for (const Row& r : rows) {
    const FormatSpec& fi = format_info(r.f);
    SCOPED_TRACE(std::string(fi.name));
    EXPECT_EQ(fi.bits, r.bits);
    EXPECT_EQ(fi.max_finite, r.max);
    EXPECT_EQ(fi.min_normal, r.min_normal);
    EXPECT_EQ(fi.min_subnormal, r.min_sub);
    EXPECT_EQ(fi.has_inf, r.inf);
    EXPECT_EQ(fi.has_nan, r.nan);
    EXPECT_EQ(fi.has_neg_zero, r.negz);
    EXPECT_EQ(fi.emax_elem, r.emax);
    EXPECT_EQ(code_count(r.f), 1u << r.bits);
    // And the oracle's enumeration agrees on the extremes.
    const auto& t = oracle(r.f).table();
    if (r.f != FormatId::int8) {
      EXPECT_EQ(t[t.size() - 2].value.convert_to<double>(), r.max);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Decode: every code against the value computed from the field layout.

void check_decode_all(FormatId f) {
  const test::Layout l = test::layout(f);
  const std::uint32_t n = 1u << l.bits;
  for (std::uint32_t c = 0; c < n; ++c) {
    const float v = decode(f, static_cast<std::uint16_t>(c));
    SCOPED_TRACE(std::string(format_name(f)) + " code " + hex(c));
    if (l.kind == test::Layout::integer) {
      EXPECT_EQ(v, static_cast<float>(c < 128 ? static_cast<int>(c) : static_cast<int>(c) - 256));
      continue;
    }
    const bool has_sign = l.kind == test::Layout::fp;
    const std::uint32_t sign = has_sign ? 1u << (l.bits - 1) : 0u;
    const std::uint32_t mag = c & ~sign;
    const bool neg = has_sign && (c & sign);
    const bool fnuz_nan = (f == FormatId::fp8_e4m3fnuz || f == FormatId::fp8_e5m2fnuz) && c == 0x80;
    const test::CodeKind k = fnuz_nan ? test::CodeKind::nan : test::code_kind(f, mag);
    EXPECT_EQ(is_nan_code(f, static_cast<std::uint16_t>(c)), k == test::CodeKind::nan);
    if (k == test::CodeKind::nan) {
      EXPECT_TRUE(std::isnan(v));
    } else if (k == test::CodeKind::inf) {
      EXPECT_EQ(v, neg ? -std::numeric_limits<float>::infinity() : std::numeric_limits<float>::infinity());
    } else {
      const test::Rational want = neg ? test::Rational(-test::code_value(f, mag)) : test::code_value(f, mag);
      EXPECT_TRUE(test::to_rational(static_cast<double>(v)) == want) << "got " << v;
      EXPECT_EQ(std::signbit(v), neg);
    }
  }
}

TEST(FormatDecode, EveryCodeOfEveryFormat) {
  for (FormatId f : all_formats()) check_decode_all(f);
}

TEST(FormatDecode, BatchEqualsScalar) {
  for (FormatId f : all_formats()) {
    std::vector<std::uint16_t> codes(code_count(f));
    for (std::size_t i = 0; i < codes.size(); ++i) codes[i] = static_cast<std::uint16_t>(i);
    std::vector<float> out(codes.size());
    decode_f32(f, codes, out);
    for (std::size_t i = 0; i < codes.size(); ++i)
      EXPECT_EQ(std::bit_cast<std::uint32_t>(out[i]), std::bit_cast<std::uint32_t>(decode(f, codes[i])));
    if (format_info(f).bits <= 8) {
      std::vector<std::uint8_t> c8(codes.begin(), codes.end());
      decode_f32(f, c8, out);
      for (std::size_t i = 0; i < codes.size(); ++i)
        EXPECT_EQ(std::bit_cast<std::uint32_t>(out[i]), std::bit_cast<std::uint32_t>(decode(f, codes[i])));
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Encode against the oracle.

// Values, midpoints (exact ties), their float and double neighbours, both signs; specials; a
// stride over all float bit patterns.
std::vector<double> boundary_inputs(const FormatOracle& o, std::size_t table_stride) {
  std::vector<double> xs;
  auto add = [&](double v) {
    for (double s : {1.0, -1.0}) {
      const double x = s * v;
      xs.push_back(x);
      const auto xf = static_cast<float>(x);
      if (static_cast<double>(xf) == x) {
        xs.push_back(std::nextafter(xf, std::numeric_limits<float>::infinity()));
        xs.push_back(std::nextafter(xf, -std::numeric_limits<float>::infinity()));
      }
      xs.push_back(std::nextafter(x, std::numeric_limits<double>::infinity()));
      xs.push_back(std::nextafter(x, -std::numeric_limits<double>::infinity()));
    }
  };
  const auto& vals = o.values_dbl();
  const auto& mids = o.midpoints_dbl();
  for (std::size_t i = 0; i < vals.size(); i += table_stride) add(vals[i]);
  for (std::size_t i = 0; i < mids.size(); i += table_stride) add(mids[i]);
  add(vals.back());
  add(mids.back());
  add(vals[vals.size() - 2]);
  for (double v : {0.0, 1.0, 0.5, 1.5, 3.0, 1e-300, 1e-45, 1e30, 1e300, 3.4028234663852886e38,
                   std::numeric_limits<double>::max(), std::numeric_limits<double>::denorm_min(),
                   std::numeric_limits<double>::infinity()})
    add(v);
  xs.push_back(std::numeric_limits<double>::quiet_NaN());
  xs.push_back(-std::numeric_limits<double>::quiet_NaN());
  return xs;
}

std::vector<float> stride_floats() {
  std::vector<float> xs;
  // 0x7FFFFFFF / 40009 ~ 53.7K patterns per sign; the odd stride visits every mantissa residue.
  for (std::uint64_t b = 0; b <= 0xFFFFFFFFull; b += 40009 * 2 + 1) xs.push_back(std::bit_cast<float>(static_cast<std::uint32_t>(b)));
  return xs;
}

TEST(FormatEncode, RationalAndDoubleOracleAgree) {
  for (FormatId f : all_formats()) {
    const FormatOracle& o = oracle(f);
    const std::size_t stride = format_info(f).bits > 8 ? 257 : 1;
    for (double x : boundary_inputs(o, stride))
      for (Rounding r : kRoundings)
        for (Overflow ov : kOverflows) ASSERT_EQ(o.encode(x, r, ov), o.encode_dbl(x, r, ov)) << ctx(f, x, r, ov);
  }
}

TEST(FormatEncode, FloatInputsMatchOracle) {
  const std::vector<float> strided = stride_floats();
  for (FormatId f : all_formats()) {
    const FormatOracle& o = oracle(f);
    std::vector<float> xs;
    for (double x : boundary_inputs(o, 1)) {
      const auto xf = static_cast<float>(x);
      if (static_cast<double>(xf) == x || std::isnan(x)) xs.push_back(xf);
    }
    xs.insert(xs.end(), strided.begin(), strided.end());
    std::size_t bad = 0;
    for (Rounding r : kRoundings) {
      for (Overflow ov : kOverflows) {
        std::vector<std::uint16_t> batch(xs.size());
        encode_f32(f, xs, batch, r, ov);
        for (std::size_t i = 0; i < xs.size(); ++i) {
          const double x = xs[i];
          const std::uint16_t want = o.encode_dbl(x, r, ov);
          const std::uint16_t got = encode(f, xs[i], r, ov);
          if (got != want || batch[i] != want) {
            if (++bad < 20)
              ADD_FAILURE() << ctx(f, x, r, ov) << " want " << hex(want) << " scalar " << hex(got) << " batch "
                            << hex(batch[i]);
          }
        }
        if (format_info(f).bits <= 8) {
          std::vector<std::uint8_t> b8(xs.size());
          encode_f32(f, xs, b8, r, ov);
          for (std::size_t i = 0; i < xs.size(); ++i) bad += b8[i] != batch[i];
        }
      }
    }
    EXPECT_EQ(bad, 0u) << format_name(f);
  }
}

TEST(FormatEncode, DoubleInputsMatchOracleSingleRounding) {
  for (FormatId f : all_formats()) {
    const FormatOracle& o = oracle(f);
    std::vector<double> xs = boundary_inputs(o, 1);
    // Doubles that are not floats next to every tie: rounding them to float first would land on
    // the tie (double rounding); the double overload must see which side they are on.
    for (double m : o.midpoints_dbl()) {
      for (double s : {1.0, -1.0}) {
        xs.push_back(s * m * (1 + 0x1p-40));
        xs.push_back(s * m * (1 - 0x1p-40));
      }
    }
    std::size_t bad = 0;
    for (Rounding r : kRoundings)
      for (Overflow ov : kOverflows)
        for (double x : xs) {
          const std::uint16_t want = o.encode_dbl(x, r, ov);
          const std::uint16_t got = encode(f, x, r, ov);
          if (got != want && ++bad < 20) ADD_FAILURE() << ctx(f, x, r, ov) << " want " << hex(want) << " got " << hex(got);
        }
    EXPECT_EQ(bad, 0u) << format_name(f);
  }
}

TEST(FormatEncode, DecodeThenEncodeIsIdentity) {
  for (FormatId f : all_formats())
    for (std::uint32_t c = 0; c < code_count(f); ++c) {
      const auto code = static_cast<std::uint16_t>(c);
      if (is_nan_code(f, code)) continue;
      const float v = decode(f, code);
      for (Rounding r : kRoundings)
        for (Overflow ov : kOverflows) {
          if (std::isinf(v) && ov == Overflow::sat_cuda) continue;
          ASSERT_EQ(encode(f, v, r, ov), code) << ctx(f, v, r, ov);
          ASSERT_EQ(encode(f, static_cast<double>(v), r, ov), code) << ctx(f, v, r, ov);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Hand examples (FORMATS.md and the header).

TEST(FormatEncode, HandExamples) {
  const auto e4 = FormatId::fp8_e4m3fn;
  EXPECT_EQ(decode(e4, encode(e4, 464.0f)), 448.0f);  // tie between 448 (0x7E) and 480 (0x7F): even
  EXPECT_EQ(decode(e4, encode(e4, 248.0f)), 256.0f);  // tie between 240 (0x77) and 256 (0x78)
  EXPECT_EQ(encode(e4, 464.0f), 0x7E);
  EXPECT_EQ(encode(e4, 464.1f), 0x7F);                 // overflow -> NaN
  EXPECT_EQ(encode(e4, -1e9f), 0xFF);
  EXPECT_EQ(encode(e4, std::numeric_limits<float>::infinity()), 0x7F);
  EXPECT_EQ(encode(e4, 1e9f, Rounding::rne, Overflow::sat_cuda), 0x7E);
  EXPECT_EQ(encode(e4, -std::numeric_limits<float>::infinity(), Rounding::rne, Overflow::sat_cuda), 0xFE);
  EXPECT_EQ(encode(e4, std::numeric_limits<float>::quiet_NaN(), Rounding::rne, Overflow::sat_cuda), 0x7F);
  EXPECT_EQ(encode(e4, -0.0f, Rounding::rne, Overflow::sat_cuda), 0x80);
  EXPECT_EQ(encode(e4, 1e9f, Rounding::rne, Overflow::sat_hip), 0x7E);
  EXPECT_EQ(encode(e4, std::numeric_limits<float>::infinity(), Rounding::rne, Overflow::sat_hip), 0x7F);
  // Double overload: 464 + 2^-30 is above the tie; as a float it would be the tie itself.
  EXPECT_EQ(static_cast<float>(464.0 + 0x1p-30), 464.0f);
  EXPECT_EQ(encode(e4, 464.0 + 0x1p-30), 0x7F);
  EXPECT_EQ(encode(e4, 464.0f + 0x1p-30f), 0x7E);

  const auto e5 = FormatId::fp8_e5m2;
  EXPECT_EQ(encode(e5, 61440.0f), 0x7C);  // tie between 57344 (0x7B) and 65536: up to Inf
  EXPECT_EQ(encode(e5, 61439.0f), 0x7B);
  EXPECT_EQ(encode(e5, -std::numeric_limits<float>::infinity(), Rounding::rne, Overflow::sat_hip), 0xFC);
  EXPECT_EQ(encode(e5, 1e9f, Rounding::rne, Overflow::sat_hip), 0x7B);
  EXPECT_TRUE(is_nan_code(e5, encode(e5, std::numeric_limits<float>::quiet_NaN())));

  const auto fnuz = FormatId::fp8_e4m3fnuz;
  EXPECT_EQ(encode(fnuz, -0.0f), 0x00);
  EXPECT_EQ(encode(fnuz, -0x1p-12f), 0x00);  // underflows to zero: no -0
  EXPECT_EQ(encode(fnuz, 248.0f), 0x80);     // tie 240 (odd 0x7F) / 256: up, overflow -> NaN
  EXPECT_EQ(encode(fnuz, 247.0f), 0x7F);
  EXPECT_EQ(encode(fnuz, std::numeric_limits<float>::infinity()), 0x80);
  EXPECT_EQ(encode(fnuz, -1e6f, Rounding::rne, Overflow::sat_cuda), 0xFF);  // -240

  const auto fp4 = FormatId::fp4_e2m1fn;
  EXPECT_EQ(decode(fp4, encode(fp4, 0.25f)), 0.0f);
  EXPECT_EQ(decode(fp4, encode(fp4, 0.75f)), 1.0f);
  EXPECT_EQ(decode(fp4, encode(fp4, 2.5f)), 2.0f);
  EXPECT_EQ(decode(fp4, encode(fp4, 5.0f)), 4.0f);
  EXPECT_EQ(decode(fp4, encode(fp4, 0.25f, Rounding::away)), 0.5f);
  EXPECT_EQ(decode(fp4, encode(fp4, 2.5f, Rounding::away)), 3.0f);
  EXPECT_EQ(decode(fp4, encode(fp4, -5.0f, Rounding::away)), -6.0f);
  EXPECT_EQ(decode(fp4, encode(fp4, 0.75f, Rounding::smaller)), 0.5f);
  EXPECT_EQ(decode(fp4, encode(fp4, 3.5f, Rounding::smaller)), 3.0f);
  EXPECT_EQ(decode(fp4, encode(fp4, -1.25f, Rounding::smaller)), -1.0f);
  EXPECT_EQ(decode(fp4, encode(fp4, 100.0f)), 6.0f);
  EXPECT_EQ(encode(fp4, std::numeric_limits<float>::quiet_NaN()), 0x8);   // ml_dtypes: -0
  EXPECT_EQ(encode(fp4, -std::numeric_limits<float>::quiet_NaN()), 0x0);  // sign flipped
  EXPECT_EQ(encode(fp4, -std::numeric_limits<float>::infinity()), 0xF);

  const auto e8 = FormatId::e8m0fnu;
  EXPECT_EQ(encode(e8, 1.0f), 127);
  EXPECT_EQ(encode(e8, 0x1p-127f), 0);
  EXPECT_EQ(encode(e8, 0x1p127f), 254);
  EXPECT_EQ(encode(e8, 3.0f), 129);                   // 1.5 * 2^1 -> 4.0: ties go up (ml_dtypes)
  EXPECT_EQ(encode(e8, 6.0f), 130);                   // 1.5 * 2^2 -> 8.0
  EXPECT_EQ(encode(e8, 0x1.8p-127f), 1);              // FP32-subnormal tie -> 2^-126 (ml_dtypes)
  EXPECT_EQ(encode(e8, std::nextafter(0x1.8p-127f, 0.0f)), 0);  // below the tie: 2^-127 is nearest
  EXPECT_EQ(encode(e8, 0x1.8p-127f, Rounding::smaller), 0);
  EXPECT_EQ(encode(e8, 3.0f, Rounding::away), 129);
  EXPECT_EQ(encode(e8, 6.0f, Rounding::smaller), 129);
  EXPECT_EQ(encode(e8, 3.01f), 129);
  EXPECT_EQ(encode(e8, 0.0f), 0xFF);
  EXPECT_EQ(encode(e8, -4.0f), 0xFF);
  EXPECT_EQ(encode(e8, 0x1p-140f), 0);               // nearest value is 2^-127
  EXPECT_EQ(encode(e8, 0x1.8p127f), 0xFF);           // tie 2^127 / 2^128 goes up: overflow -> NaN
  EXPECT_EQ(encode(e8, 0x1.8p127f, Rounding::rne, Overflow::sat_cuda), 0xFE);
  EXPECT_EQ(encode(e8, 0x1.9p127f), 0xFF);           // overflow -> NaN
  EXPECT_EQ(encode(e8, 0x1.9p127f, Rounding::rne, Overflow::sat_cuda), 0xFE);
  EXPECT_EQ(encode(e8, -4.0f, Rounding::rne, Overflow::sat_cuda), 0x00);

  const auto i8 = FormatId::int8;
  EXPECT_EQ(encode(i8, 2.5f), 2);
  EXPECT_EQ(encode(i8, 3.5f), 4);
  EXPECT_EQ(encode(i8, -2.5f), 0xFE);
  EXPECT_EQ(encode(i8, 2.5f, Rounding::away), 3);
  EXPECT_EQ(encode(i8, -2.5f, Rounding::away), 0xFD);
  EXPECT_EQ(encode(i8, 2.5f, Rounding::smaller), 2);
  EXPECT_EQ(encode(i8, 200.0f), 127);
  EXPECT_EQ(encode(i8, -200.0f), 0x80);
  EXPECT_EQ(encode(i8, -128.4f), 0x80);
  EXPECT_EQ(encode(i8, 127.5f), 127);
  EXPECT_EQ(encode(i8, -0.4f), 0);
  EXPECT_EQ(encode(i8, std::numeric_limits<float>::quiet_NaN()), 0);
  EXPECT_EQ(decode(i8, 0x80), -128.0f);

  const auto bf = FormatId::bf16;
  EXPECT_EQ(encode(bf, 1.0f), 0x3F80);
  EXPECT_EQ(encode(bf, std::numeric_limits<float>::max()), 0x7F80);
  EXPECT_EQ(encode(bf, std::bit_cast<float>(0x3F808000u)), 0x3F80);  // tie, even
  EXPECT_EQ(encode(bf, std::bit_cast<float>(0x3F818000u)), 0x3F82);  // tie, odd -> up
  EXPECT_EQ(encode(bf, std::numeric_limits<float>::denorm_min()), 0x0000);
  EXPECT_EQ(encode(bf, std::bit_cast<float>(0x00008001u)), 0x0001);  // subnormal kept
  EXPECT_EQ(encode(bf, std::numeric_limits<float>::quiet_NaN()), 0x7FC0);
  EXPECT_EQ(encode(bf, std::numeric_limits<float>::quiet_NaN(), Rounding::rne, Overflow::sat_cuda), 0x7FFF);
  EXPECT_EQ(encode(FormatId::fp16, 65520.0f), 0x7C00);  // tie 65504 (odd) / 65536: Inf
  EXPECT_EQ(encode(FormatId::fp16, 65519.0f), 0x7BFF);
  EXPECT_EQ(round_to(FormatId::fp16, 1.0f + 0x1p-11f), 1.0f);
}

TEST(FormatEncode, BatchSizeMismatchAndByteOutputForWideFormat) {
  std::vector<float> in(4, 1.0f);
  std::vector<std::uint16_t> out16(3);
  std::vector<std::uint8_t> out8(4);
  EXPECT_THROW(encode_f32(FormatId::fp8_e4m3fn, in, out16), Error);
  EXPECT_THROW(encode_f32(FormatId::bf16, in, out8), Error);
  std::vector<float> d(3);
  EXPECT_THROW(decode_f32(FormatId::bf16, std::span<const std::uint8_t>(out8), std::span<float>(d)), Error);
}

// ---------------------------------------------------------------------------------------------
// Packing.

TEST(FormatPack, DocumentedBitOrder) {
  const std::vector<std::uint8_t> fp4 = {0x1, 0x2, 0xF, 0x0, 0x7};
  // byte j = code[2j] | code[2j+1] << 4; a trailing odd code fills the low nibble.
  EXPECT_EQ(pack(FormatId::fp4_e2m1fn, fp4), (std::vector<std::uint8_t>{0x21, 0x0F, 0x07}));
  const std::vector<std::uint8_t> fp6 = {0x01, 0x02, 0x03, 0x04, 0x3F};
  // b0 = c0 | c1 << 6 = 0x01 | 0x80; b1 = c1 >> 2 | c2 << 4 = 0x30; b2 = c2 >> 4 | c3 << 2 = 0x10;
  // the fifth code starts a new group in the low 6 bits of byte 3.
  EXPECT_EQ(pack(FormatId::fp6_e2m3fn, fp6), (std::vector<std::uint8_t>{0x81, 0x30, 0x10, 0x3F}));
  EXPECT_EQ(pack(FormatId::fp6_e3m2fn, std::vector<std::uint8_t>{0x3F, 0x3F, 0x3F, 0x3F}),
            (std::vector<std::uint8_t>{0xFF, 0xFF, 0xFF}));
  EXPECT_EQ(unpack(FormatId::fp6_e3m2fn, std::vector<std::uint8_t>{0x81, 0x30, 0x10, 0x3F}, 5), fp6);
  EXPECT_EQ(unpack(FormatId::fp4_e2m1fn, std::vector<std::uint8_t>{0x21, 0x0F, 0x07}, 5), fp4);
}

TEST(FormatPack, RoundTripAndErrors) {
  std::mt19937 rng(7);
  for (FormatId f : {FormatId::fp4_e2m1fn, FormatId::fp6_e2m3fn, FormatId::fp6_e3m2fn}) {
    const int bits = format_info(f).bits;
    for (std::size_t n : {0u, 1u, 2u, 3u, 4u, 5u, 7u, 8u, 33u, 1000u}) {
      std::vector<std::uint8_t> codes(n);
      for (auto& c : codes) c = static_cast<std::uint8_t>(rng() & ((1u << bits) - 1));
      const auto packed = pack(f, codes);
      EXPECT_EQ(packed.size(), (n * static_cast<std::size_t>(bits) + 7) / 8);
      EXPECT_EQ(unpack(f, packed, n), codes);
    }
    EXPECT_THROW(pack(f, std::vector<std::uint8_t>{static_cast<std::uint8_t>(1u << bits)}), Error);
    EXPECT_THROW(unpack(f, std::vector<std::uint8_t>{0, 0}, 1), Error);
  }
  EXPECT_THROW(pack(FormatId::fp8_e4m3fn, std::vector<std::uint8_t>{1}), Error);
  EXPECT_THROW(unpack(FormatId::int8, std::vector<std::uint8_t>{1}, 1), Error);
}

}  // namespace
}  // namespace attest::ref
