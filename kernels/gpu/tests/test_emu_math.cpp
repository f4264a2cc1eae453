// The host/device scalar functions of the gpu.emu kernels (emu_math.hpp) against the emulator
// (reference/src/exp2.cpp) and the CPU kernels' rounding (kernels/cpu), on the CPU: the same
// source is what nvcc / clang compile for the device (no contraction on either side), so equal
// bits here are the device arithmetic's contract, checked in every build, GPU or not. EmuRowSim
// goes further: the device kernel's per-row code (emu_row.hpp), driven by the launch's work
// decomposition on the CPU, against the emulator for every named recipe.
#include <gtest/gtest.h>

#include <bit>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "attest/datasets/distributions.hpp"
#include "attest/kernels/gpu/attn_fwd_emu.hpp"
#include "attest/kernels/gpu/emu_host.hpp"
#include "attest/kernels/gpu/emu_row.hpp"
#include "attest/reference/emulate.hpp"
#include "cpu/cpu_numerics.hpp"
#include "cpu/cpu_quantize.hpp"
#include "cpu/cpu_scheme.hpp"
#include "kernel_test_util.hpp"

namespace attest::gpu::test {
namespace {

using emu::fbits;
using emu::ffrom;

TEST(EmuMath, CoefficientsAreTheRoundedTaylorCoefficients) {
  const double* c = exp2_cr_coefficients();
  EXPECT_EQ(c[0], 1.0);
  EXPECT_EQ(c[1], 0x1.62e42fefa39efp-1);  // RN(ln 2)
  for (int k = 2; k < 16; ++k) EXPECT_NEAR(c[k], c[k - 1] * c[1] / k, 1e-15 * c[k - 1]) << k;
}

TEST(EmuMath, Exp2CrEqualsTheEmulator) {
  // Every 4099th bit pattern that is a float in [-160, 130), plus the edges.
  const double* c = exp2_cr_coefficients();
  unsigned undecided = 0;
  std::int64_t n = 0;
  std::vector<float> xs = {-150.0f, -149.99999f, -149.0f, -126.5f, -0.0f, 0.0f, 1e-30f, -1e-30f, 127.99999f, 128.0f};
  for (std::uint64_t u = 0; u < 0x100000000u; u += 4099) {
    const float x = ffrom(static_cast<std::uint32_t>(u));
    if (x >= -160.0f && x < 130.0f) xs.push_back(x);
  }
  for (float x : xs) {
    ASSERT_EQ(fbits(emu::exp2_cr(x, c, &undecided)), fbits(ref::exp2_cr(x))) << x;
    ++n;
  }
  EXPECT_EQ(undecided, 0u);
  EXPECT_GT(n, 500000);
}

TEST(EmuMath, Exp2CrDoubleDoublePathIsCorrectlyRounded) {
  // The fallback on its own (normally taken about once in 2^21 inputs) against the emulator's
  // 166-bit-checked exp2_cr, over every 65521st float of [-150, 128).
  unsigned undecided = 0;
  std::int64_t n = 0;
  for (std::uint64_t u = 0; u < 0x100000000u; u += 65521) {
    const float x = ffrom(static_cast<std::uint32_t>(u));
    if (!(x > -150.0f && x < 128.0f)) continue;
    ASSERT_EQ(fbits(emu::exp2_cr_dd(x, &undecided)), fbits(ref::exp2_cr(x))) << x;
    ++n;
  }
  EXPECT_EQ(undecided, 0u);
  EXPECT_GT(n, 30000);
}

TEST(EmuMath, Exp2Fa4EqualsTheEmulator) {
  std::vector<float> xs = {-127.0f, -128.0f, -1e-30f, -0x1p-40f, 0.0f, -0.0f, 1e-30f, 7.99f, std::nanf("")};
  for (std::uint64_t u = 0; u < 0x100000000u; u += 10007) {
    const float x = ffrom(static_cast<std::uint32_t>(u));
    if (x >= -140.0f && x < 16.0f) xs.push_back(x);
  }
  for (float x : xs) ASSERT_EQ(fbits(emu::exp2_fa4(x)), fbits(ref::exp2_fa4(x))) << x;
}

TEST(EmuMath, Log2AndLseEqualTheEmulator) {
  for (std::uint64_t u = 0x00800000u; u < 0x7F800000u; u += 9973) {
    const double x = static_cast<double>(ffrom(static_cast<std::uint32_t>(u)));
    ASSERT_EQ(std::bit_cast<std::uint64_t>(emu::log2_portable(x)), std::bit_cast<std::uint64_t>(ref::log2_portable(x))) << x;
  }
  EXPECT_EQ(emu::log2_portable(0.0), -HUGE_VAL);
  EXPECT_TRUE(std::isnan(emu::log2_portable(-1.0)));
}

TEST(EmuMath, RoundingEqualsTheCpuKernels) {
  // The device port of round_to against kernels/cpu's (the formats of P, O and MX elements).
  namespace cpu = attest::kernels::cpu;
  const FormatId fmts[] = {FormatId::bf16, FormatId::fp16, FormatId::fp8_e4m3fn, FormatId::fp8_e5m2, FormatId::fp8_e4m3fnuz,
                           FormatId::fp4_e2m1fn, FormatId::fp6_e2m3fn, FormatId::fp6_e3m2fn};
  const Scheme::Rounding ties[] = {Scheme::Rounding::rne, Scheme::Rounding::away, Scheme::Rounding::smaller};
  const Scheme::Overflow sats[] = {Scheme::Overflow::ieee, Scheme::Overflow::sat_cuda, Scheme::Overflow::sat_hip};
  for (const FormatId id : fmts) {
    const FormatSpec& f = format_spec(id);
    for (int ti = 0; ti < 3; ++ti)
      for (int si = 0; si < 3; ++si)
        for (std::uint64_t u = 0; u < 0x100000000u; u += 104729) {
          const float x = ffrom(static_cast<std::uint32_t>(u));
          const float want = cpu::round_to(f, x, ties[ti], sats[si]);
          const float got = emu::round_to(f, x, ties[ti], sats[si]);
          if (std::isnan(want) && std::isnan(got)) continue;
          ASSERT_EQ(fbits(got), fbits(want)) << x << " " << f.name << " tie " << ti << " sat " << si;
        }
  }
}

TEST(EmuMath, E8m0ScalesEqualTheCpuKernels) {
  namespace cpu = attest::kernels::cpu;
  const char* rules[] = {"mxfp4_e2m1fn:scale=aiter_hip_fp4:round=smaller", "mxfp4_e2m1fn", "mxfp4_e2m1fn:scale=ceil"};
  for (const char* text : rules) {
    const Scheme s = parse_scheme(text);
    const Scheme::E8M0Rule rule = s.e8m0;
    const int emax = std::ilogb(format_spec(s.element).max_finite);
    for (std::uint64_t u = 0; u < 0x80000000u; u += 7919) {
      const float a = ffrom(static_cast<std::uint32_t>(u));
      const std::uint32_t code = emu::e8m0_code(a, rule, emax);
      ASSERT_EQ(code, cpu::e8m0_code(a, s)) << text << " " << a;
      const float m = emu::e8m0_multiplier(code), mc = cpu::e8m0_multiplier(static_cast<std::uint8_t>(code), s);
      if (!(std::isnan(m) && std::isnan(mc))) {
        ASSERT_EQ(fbits(m), fbits(mc)) << text << " " << a;
      }
    }
  }
}

}  // namespace
}  // namespace attest::gpu::test

// ---- the device's per-row code (emu_row.hpp) run on the CPU vs the emulator ----

// The host simulation's rcp_sm90: kernels/cpu's model of the measured table (on the device:
// the hardware instruction).
float attest::gpu::emu_impl::rcp_sm90_host(float x) { return attest::kernels::cpu::rcp_sm90(x); }

namespace attest::gpu::test {
namespace {

namespace kt = attest::kernels::test;

template <class T>
const T* ptr(const std::vector<T>& v) {
  return v.empty() ? nullptr : v.data();
}

// Which of the emulator's outputs the simulation produces: `twin` = emulate(..., floor_twin())
// (reverse_kv, twin_tile_kv), `rounded` = false: out_unrounded.
struct SimOpts {
  bool twin = false, rounded = true;
};

// Runs the kernel's work decomposition sequentially on the CPU: every (item, thread) of the
// launch calls emu_row with the template argument the launcher picks. Outputs in the
// emulator's layout.
kt::Result simulate(const Problem& p, const Recipe& r, const datasets::Qkv& in, SimOpts o = {}) {
  EmuHost hs = emu_prepare_host(p, r, in.q, in.k, in.v);
  EmuParams ep = hs.params;
  ep.reverse_kv = o.twin;
  if (o.twin) ep.tile_kv = twin_tile_kv(r);
  ep.out_round = ep.out_round && o.rounded;
  ep.batches = ptr(hs.batches), ep.items = ptr(hs.items);
  ep.qv = ptr(hs.qval), ep.kv = ptr(hs.kval), ep.vv = ptr(hs.vval), ep.qi = ptr(hs.qi), ep.ki = ptr(hs.ki);
  ep.qts = ptr(hs.qts), ep.kts = ptr(hs.kts), ep.vcs = ptr(hs.vcs);
  ep.qexp = ptr(hs.qexp), ep.kexp = ptr(hs.kexp), ep.vexp = ptr(hs.vexp), ep.km = ptr(hs.km), ep.qraw = ptr(hs.qraw);
  const std::int64_t H = p.heads_q, Dv = p.head_dim_v, rows = ep.total_rows;
  std::vector<float> out(static_cast<std::size_t>(rows * H * Dv), -1.0f), lse(static_cast<std::size_t>(H * rows), -1.0f);
  const std::int64_t ns = ep.n_items * ep.block_threads;
  std::vector<float> scratch(static_cast<std::size_t>(std::max<std::int64_t>(1, ns * (3 * ep.tile_kv + 2 * Dv))));
  unsigned undecided = 0;
  ep.out = out.data(), ep.lse = lse.data(), ep.scratch = scratch.data(), ep.undecided = &undecided;
  const bool reg = ep.p != EmuP::mx && ep.vexp == nullptr && (Dv == 64 || Dv == 128);
  for (std::int64_t it = 0; it < ep.n_items; ++it) {
    const EmuItem w = hs.items[static_cast<std::size_t>(it)];
    const EmuBatch& bt = hs.batches[static_cast<std::size_t>(w.b)];
    for (std::int64_t t = 0; t < ep.block_threads; ++t) {
      float* scr = scratch.data() + it * ep.block_threads + t;
      for (std::int64_t i = w.r0 + t; i < w.r1; i += ep.block_threads) {
        if (reg && Dv == 64) emu_impl::emu_row<64>(ep, bt, w.h, i, scr, ns);
        else if (reg) emu_impl::emu_row<128>(ep, bt, w.h, i, scr, ns);
        else emu_impl::emu_row<0>(ep, bt, w.h, i, scr, ns);
      }
    }
  }
  EXPECT_EQ(undecided, 0u);
  const bool rg = p.ragged();
  const std::int64_t B = rg ? 1 : p.batch, S = rows / B;
  kt::Result res{Tensor(DType::f32, {B, S, H, Dv}), Tensor(DType::f32, {B, H, S})};
  std::copy(out.begin(), out.end(), res.out.data<float>());  // [orow][H][Dv] with orow = b * S + i
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t h = 0; h < H; ++h)
      for (std::int64_t i = 0; i < S; ++i)
        res.lse.data<float>()[(b * H + h) * S + i] = lse[static_cast<std::size_t>(h * rows + b * S + i)];
  return res;
}

std::string hexf(float x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g (0x%08x)", static_cast<double>(x), fbits(x));
  return buf;
}

struct SimCase {
  const char* problem;
  datasets::Distribution dist;
  std::uint64_t seed;
};

// Partial tiles, S != T, GQA with head_dim_v != head_dim, both causal alignments (S > T: fully
// masked rows), a ragged batch, D = 64 (register accumulators) and D = 128.
const SimCase kSimCases[] = {
    {"b1h2s70t150d128", datasets::Distribution::normal, 1},
    {"b1h4k2s33t200d128v64:mask=causal_br", datasets::Distribution::diffusion, 3},
    {"b2h2s40t40d128:mask=causal_tl:cu_q=0,40,57:cu_kv=0,40,71", datasets::Distribution::outlier, 4},
    {"b1h3k1s131t77d64:mask=causal_br", datasets::Distribution::normal, 5},
};

class EmuRowSim : public ::testing::TestWithParam<std::string> {};

// Bits of `got` vs `want` (NaN equals NaN), the first mismatch named.
void expect_bits(const Tensor& got, const Tensor& want, const char* what) {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  const std::int64_t m = kt::first_bit_mismatch(got, want);
  EXPECT_LT(m, 0) << what << "[" << m << "] sim " << (m >= 0 ? hexf(got.data<float>()[m]) : "") << " emulator "
                  << (m >= 0 ? hexf(want.data<float>()[m]) : "");
}

TEST_P(EmuRowSim, DeviceRowCodeOnTheCpuEqualsTheEmulator) {
  const Recipe r = parse_recipe(GetParam());
  int compared = 0;
  for (const SimCase& c : kSimCases) {
    const Problem p = parse_problem(c.problem);
    if (!emu_unsupported(p, r).empty()) continue;
    SCOPED_TRACE(std::string(c.problem) + " seed " + std::to_string(c.seed));
    const auto in = datasets::generate_qkv(p, c.dist, c.seed);
    const ref::EmulatorOutput want = ref::emulate(p, r, in.q, in.k, in.v);
    const kt::Result got = simulate(p, r, in);
    expect_bits(got.out, want.out, "out");
    expect_bits(got.lse, want.lse, "lse");
    ++compared;
  }
  EXPECT_GT(compared, 0);
}

// The four outputs the conformance engine takes from the emulator -- out and out_unrounded of
// emulate() and of emulate(..., floor_twin()) -- from the device's row code (reverse_kv,
// twin_tile_kv, out_round), plus the twin's LSE, on problems with a causal mask, GQA and a
// partial last KV tile (T = 200, 77; tile_kv 64 or 128 and their halves).
TEST_P(EmuRowSim, DeviceRowCodeGivesTheFloorTwinAndUnroundedOutputs) {
  const Recipe r = parse_recipe(GetParam());
  int compared = 0;
  std::int64_t twin_moved = 0;  // elements where the twin's out_unrounded differs from emulate()'s
  for (const SimCase& c : kSimCases) {
    const Problem p = parse_problem(c.problem);
    if (!emu_unsupported(p, r).empty() || p.mask == Mask::none || p.heads_kv == p.heads_q) continue;
    SCOPED_TRACE(std::string(c.problem) + " seed " + std::to_string(c.seed));
    const auto in = datasets::generate_qkv(p, c.dist, c.seed);
    const ref::EmulatorOutput want = ref::emulate(p, r, in.q, in.k, in.v);
    const ref::EmulatorOutput twin = ref::emulate(p, r, in.q, in.k, in.v, ref::floor_twin());
    expect_bits(simulate(p, r, in, {false, false}).out, want.out_unrounded, "out_unrounded");
    const kt::Result t = simulate(p, r, in, {true, true});
    expect_bits(t.out, twin.out, "twin out");
    expect_bits(t.lse, twin.lse, "twin lse");
    expect_bits(simulate(p, r, in, {true, false}).out, twin.out_unrounded, "twin out_unrounded");
    const float* a = want.out_unrounded.data<float>();
    const float* b = twin.out_unrounded.data<float>();
    for (std::int64_t i = 0; i < want.out_unrounded.numel(); ++i) twin_moved += fbits(a[i]) != fbits(b[i]);
    ++compared;
  }
  EXPECT_GT(compared, 0);
  // The twin must be another order, not the same one: otherwise the checks above prove nothing.
  EXPECT_GT(twin_moved, 0) << "the floor twin equals the plain emulation on every test problem";
}

std::vector<std::string> named() {
  std::vector<std::string> v;
  for (const NamedRecipe& nr : named_recipes()) v.emplace_back(nr.name);
  return v;
}

INSTANTIATE_TEST_SUITE_P(Named, EmuRowSim, ::testing::ValuesIn(named()),
                         [](const ::testing::TestParamInfo<std::string>& pi) { return pi.param; });

// Recipes beside the named ones where the floor twin's rules show: block-scaled P.V whose block
// sums are inexact (MX V with bf16 P, MX P with bf16 V: the key order inside a block matters; the
// named MX recipes pair fp4 with fp4, whose block sums are exact), a halved tile that would break
// the 32-key P.V block (96, 32: the twin keeps the tile and only reverses), odd and unit tiles.
const std::vector<std::string> kExtraRecipes = {
    "v=mxfp4_e2m1fn;tile_kv=64",
    "v=mxfp4_e2m1fn;tile_kv=96",
    "v=mxfp4_e2m1fn;tile_kv=32",
    "p=fp4_e2m1fn;tile_kv=128;p_mx=mxfp4_e2m1fn",
    "tile_kv=50",
    "tile_kv=1",
};

INSTANTIATE_TEST_SUITE_P(Extra, EmuRowSim, ::testing::ValuesIn(kExtraRecipes),
                         [](const ::testing::TestParamInfo<std::string>& pi) {
                           std::string n = pi.param;
                           for (char& ch : n)
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return n;
                         });

}  // namespace
}  // namespace attest::gpu::test
