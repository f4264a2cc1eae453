// gpu.emu.<recipe> against the recipe emulator (reference/emulate), bit for bit, output and LSE
// (and, through the launch parameters, out_unrounded and the floor twin's outputs).
// Device tests SKIP without a device. The host/device scalar functions the kernels are built
// from are checked on the CPU in every build (kernels/gpu/tests/test_emu_math.cpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "attest/kernels/gpu/attn_fwd_emu.hpp"
#include "attest/kernels/gpu/emu_host.hpp"
#include "attest/kernels/gpu/emu_prepare.hpp"
#include "attest/reference/emulate.hpp"
#include "gpu_test_util.hpp"
#include "kernel_test_util.hpp"

namespace attest::gpu::test {
namespace {

namespace kt = attest::kernels::test;
using emu::fbits;
using emu::ffrom;

// ---- device kernels vs the emulator ----

struct Case {
  const char* problem;
  datasets::Distribution dist;
  std::uint64_t seed;
};

// Partial Q and KV tiles, S != T, GQA, head_dim_v != head_dim, both causal alignments (S > T
// gives fully masked rows), ragged batches, D = 64 (register path) and D = 128.
const Case kCases[] = {
    {"b1h2s70t150d128", datasets::Distribution::normal, 1},
    {"b1h2s70t150d128", datasets::Distribution::diffusion, 2},
    {"b1h4k2s33t200d128v64:mask=causal_br", datasets::Distribution::normal, 3},
    {"b2h2s40t40d128:mask=causal_tl:cu_q=0,40,57:cu_kv=0,40,71", datasets::Distribution::diffusion, 4},
    {"b1h3k1s131t77d64:mask=causal_br", datasets::Distribution::outlier, 5},
    {"b2h2s150t260d64:mask=causal_tl", datasets::Distribution::normal, 6},
};

std::string hexf(float x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g (0x%08x)", static_cast<double>(x), fbits(x));
  return buf;
}

// First mismatch of `got` vs `want` with both values and, for an output element, its row's LSE
// on both sides (the LSE carries the row's final max and sum: m + log2 l).
std::string describe(const Problem& p, const Tensor& got, const Tensor& want, std::int64_t i, const Tensor& glse,
                     const Tensor& wlse, bool is_out) {
  std::string s = "first mismatch at flat index " + std::to_string(i) + " of " + shape_string(got.shape()) +
                  ": device " + hexf(got.data<float>()[i]) + " vs emulator " + hexf(want.data<float>()[i]);
  if (is_out) {
    const std::int64_t Dv = p.head_dim_v, H = p.heads_q, rows = got.shape()[1];
    const std::int64_t d = i % Dv, h = (i / Dv) % H, row = (i / (Dv * H)) % rows, b = i / (Dv * H * rows);
    const std::int64_t li = (b * H + h) * rows + row;
    s += " [b/row/h/d " + std::to_string(b) + "/" + std::to_string(row) + "/" + std::to_string(h) + "/" +
         std::to_string(d) + "; row lse device " + hexf(glse.data<float>()[li]) + " emulator " +
         hexf(wlse.data<float>()[li]) + "]";
  }
  return s;
}

// One launch of the prepared operands with the floor twin's order (reverse_kv, twin_tile_kv) or
// not and the output rounding or not, in the emulator's layouts (out [B|1,S,H,Dv], lse [B|1,H,S]).
kt::Result launch(const Problem& p, const Recipe& r, EmuRun& run, bool twin, bool rounded) {
  const EmuParams base = run.params;
  run.params.reverse_kv = twin;
  if (twin) run.params.tile_kv = twin_tile_kv(r);  // <= the prepared tile_kv: scratch suffices
  run.params.out_round = base.out_round && rounded;
  std::vector<float> out, lse;
  if (run.params.n_items > 0) {
    attn_fwd_emu(run.params);
    synchronize();
    emu_collect(run, out, lse);
  }
  run.params = base;
  const std::int64_t H = p.heads_q, Dv = p.head_dim_v, rows = base.total_rows;
  const std::int64_t B = p.ragged() ? 1 : p.batch, S = rows / B;
  kt::Result res{Tensor(DType::f32, {B, S, H, Dv}), Tensor(DType::f32, {B, H, S})};
  if (out.empty()) return res;
  std::copy(out.begin(), out.end(), res.out.data<float>());  // [orow][H][Dv], orow = b * S + i
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t h = 0; h < H; ++h)
      for (std::int64_t i = 0; i < S; ++i)
        res.lse.data<float>()[(b * H + h) * S + i] = lse[static_cast<std::size_t>(h * rows + b * S + i)];
  return res;
}

std::vector<std::string> emu_kernels() {
  std::vector<std::string> v;
  for (const NamedRecipe& nr : named_recipes()) v.push_back("gpu.emu." + std::string(nr.name));
  return v;
}

class GpuEmu : public ::testing::TestWithParam<std::string> {};

TEST_P(GpuEmu, RegisteredForItsNamedRecipe) {
  kernels::Kernel* k = kernels::Registry::instance().find(GetParam());
  ASSERT_NE(k, nullptr) << GetParam();
  EXPECT_TRUE(k->capabilities().bitwise);
  EXPECT_EQ(k->recipes().at(0), recipe_label(parse_recipe(GetParam().substr(8))));
}

TEST_P(GpuEmu, BitwiseEqualToTheEmulator) {
  ATTEST_REQUIRE_GPU();
  kernels::Kernel* k = kernels::Registry::instance().find(GetParam());
  ASSERT_NE(k, nullptr);
  const Recipe r = parse_recipe(k->recipes().at(0));
  int compared = 0;
  for (const Case& c : kCases) {
    const Problem p = parse_problem(c.problem);
    if (const Status st = k->supports(p, r); !st) {
      std::printf("[ %s ] skips %s: %s\n", GetParam().c_str(), c.problem, st.reason().c_str());
      continue;
    }
    SCOPED_TRACE(std::string(c.problem) + " " + std::string(datasets::distribution_name(c.dist)) + " seed " + std::to_string(c.seed));
    const auto in = datasets::generate_qkv(p, c.dist, c.seed);
    const ref::EmulatorOutput want = ref::emulate(p, r, in.q, in.k, in.v);
    const kt::Result got = kt::run_kernel(GetParam(), p, r, in);
    const std::int64_t mo = kt::first_bit_mismatch(got.out, want.out);
    EXPECT_LT(mo, 0) << "out " << (mo >= 0 ? describe(p, got.out, want.out, mo, got.lse, want.lse, true) : "");
    const std::int64_t ml = kt::first_bit_mismatch(got.lse, want.lse);
    EXPECT_LT(ml, 0) << "lse " << (ml >= 0 ? describe(p, got.lse, want.lse, ml, got.lse, want.lse, false) : "");
    // Equal bits must mean something: most outputs finite and nonzero.
    std::int64_t live = 0;
    for (std::int64_t i = 0; i < got.out.numel(); ++i)
      live += std::isfinite(got.out.data<float>()[i]) && got.out.data<float>()[i] != 0.0f;
    EXPECT_GT(live, got.out.numel() / 2);
    // The emulator's other outputs from the same launch parameters: out_unrounded, and the floor
    // twin's out, out_unrounded and LSE (emulate(..., floor_twin())).
    const ref::EmulatorOutput twin = ref::emulate(p, r, in.q, in.k, in.v, ref::floor_twin());
    EmuRun run = emu_prepare(p, r, in.q, in.k, in.v);
    const kt::Result unr = launch(p, r, run, false, false);
    const kt::Result tw = launch(p, r, run, true, true);
    const kt::Result twu = launch(p, r, run, true, false);
    const std::int64_t mu = kt::first_bit_mismatch(unr.out, want.out_unrounded);
    EXPECT_LT(mu, 0) << "out_unrounded "
                     << (mu >= 0 ? describe(p, unr.out, want.out_unrounded, mu, unr.lse, want.lse, true) : "");
    const std::int64_t mt = kt::first_bit_mismatch(tw.out, twin.out);
    EXPECT_LT(mt, 0) << "twin out " << (mt >= 0 ? describe(p, tw.out, twin.out, mt, tw.lse, twin.lse, true) : "");
    const std::int64_t mtl = kt::first_bit_mismatch(tw.lse, twin.lse);
    EXPECT_LT(mtl, 0) << "twin lse " << (mtl >= 0 ? describe(p, tw.lse, twin.lse, mtl, tw.lse, twin.lse, false) : "");
    const std::int64_t mtu = kt::first_bit_mismatch(twu.out, twin.out_unrounded);
    EXPECT_LT(mtu, 0) << "twin out_unrounded "
                      << (mtu >= 0 ? describe(p, twu.out, twin.out_unrounded, mtu, twu.lse, twin.lse, true) : "");
    ++compared;
  }
  EXPECT_GT(compared, 0) << GetParam() << " supports none of the test problems";
}

TEST_P(GpuEmu, RunToRunDeterministicAndLayoutIndependent) {
  ATTEST_REQUIRE_GPU();
  kernels::Kernel* k = kernels::Registry::instance().find(GetParam());
  ASSERT_NE(k, nullptr);
  const Recipe r = parse_recipe(k->recipes().at(0));
  const Problem p = parse_problem("b1h2s70t150d128:mask=causal_tl");
  if (!k->supports(p, r)) GTEST_SKIP() << k->supports(p, r).reason();
  Problem pb = p;
  pb.layout = Layout::bhsd;
  const auto in = datasets::generate_qkv(p, datasets::Distribution::normal, 11);
  const kt::Result a = kt::run_kernel(GetParam(), p, r, in), b = kt::run_kernel(GetParam(), p, r, in);
  const kt::Result c = kt::run_kernel(GetParam(), pb, r, in);
  EXPECT_TRUE(kt::bitwise_equal(a, b));
  EXPECT_TRUE(kt::bitwise_equal(a, c));
}

INSTANTIATE_TEST_SUITE_P(Named, GpuEmu, ::testing::ValuesIn(emu_kernels()),
                         [](const ::testing::TestParamInfo<std::string>& pi) { return pi.param.substr(8); });

TEST(GpuEmuRefusals, SayWhy) {
  ATTEST_REQUIRE_GPU();
  kernels::Kernel* k = kernels::Registry::instance().find("gpu.emu.mxfp4_fp4_had");
  ASSERT_NE(k, nullptr);
  const Status st = k->supports(parse_problem("b1h1s8t8d64"), parse_recipe("mxfp4_fp4_had"));
  EXPECT_FALSE(st);
  // Refused by the head_dim it declares (the registry's "head_dim 64 not supported", H100
  // 2026-12-07) or by stage 0's rotation rule ("... needs head_dim 128"): either names head_dim.
  EXPECT_NE(st.reason().find("head_dim"), std::string::npos) << st.reason();
  kernels::Kernel* s = kernels::Registry::instance().find("gpu.emu.sage_int8_fp8_perwarp");
  ASSERT_NE(s, nullptr);
  const Status ss = s->supports(parse_problem("b1h1s8t8d128"), parse_recipe("sage_int8_fp8_perwarp"));
  EXPECT_EQ(static_cast<bool>(ss), emu_has_rcp_sm90()) << ss.reason();
}

}  // namespace
}  // namespace attest::gpu::test
