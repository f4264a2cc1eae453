// The conformance engine (engine.hpp) on host tensors: the same code path that judges device
// buffers, fed host memory. The kernel under test is the recipe emulator itself (bitwise the
// recipe by construction); planted bugs edit its output. Oracles: metrics::compare (an
// independent implementation of rel_l2), closed-form fingerprints of edited tensors.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <set>
#include <tuple>

#include "attest/conformance/engine.hpp"
#include "attest/conformance/gate.hpp"
#include "attest/core/status.hpp"
#include "attest/core/recipe.hpp"
#include "attest/datasets/distributions.hpp"
#include "attest/metrics/tensor_metrics.hpp"
#include "attest/reference/attention.hpp"
#include "attest/reference/emulate.hpp"
#include "attest/reference/formats.hpp"

namespace attest::conformance::engine {
namespace {

// Accuracy and bitwise on the kernel output `out`, sampled to at most `macs` multiply-adds.
JudgeRequest request_for(const Case& c, const datasets::Qkv& in, const Tensor& out, double macs) {
  JudgeRequest r;
  r.c = c;
  r.checks = {"accuracy", "bitwise"};
  r.sample.max_macs = macs;
  r.q = ref_of(in.q);
  r.k = ref_of(in.k);
  r.v = ref_of(in.v);
  r.out = ref_of(out);
  return r;
}

struct Fixture {
  Case c;
  datasets::Qkv in;
  Tensor out;  // the emulator's output: a kernel exact to the recipe
  Fixture() {
    c.kernel = "test.emulator";
    c.recipe = parse_recipe("bf16");
    c.problem = parse_problem("b1h4s700d64");
    in = datasets::generate_qkv(c.problem, c.dist, c.seed);
    out = ref::emulate(c.problem, c.recipe, in.q, in.k, in.v).out.contiguous();
  }
  JudgeRequest request(double macs) const { return request_for(c, in, out, macs); }
};

TEST(Engine, ExactKernelPassesEveryBlockAndTheReportStatesCoverage) {
  Fixture f;
  const auto rep = judge(f.request(1 << 22));  // a sample: 4 of 44 blocks emulated
  ASSERT_EQ(rep.results.size(), 2u);
  EXPECT_EQ(rep.results[0].outcome.verdict, Verdict::passed) << rep.results[0].outcome.reason;
  EXPECT_EQ(rep.results[1].outcome.verdict, Verdict::passed) << rep.results[1].outcome.reason;
  EXPECT_FALSE(rep.sample.at("complete").get<bool>());
  EXPECT_EQ(rep.sample.at("coverage").at("rows_compared_fp64"), 4 * 700);
  EXPECT_EQ(rep.sample.at("coverage").at("fraction"), 1.0);
  const auto& blocks = rep.results[0].outcome.figures.at("blocks");
  EXPECT_EQ(blocks.at("count"), 4 * 11);
  EXPECT_EQ(blocks.at("failed"), 0);
  // The whole-output sums against the metrics library's comparison of the same tensors.
  const auto r64 = ref::attention(f.c.problem, f.in.q, f.in.k, f.in.v, ref::Precision::fp64);
  EXPECT_NEAR(blocks.at("whole").at("rel_l2").get<double>(), metrics::compare(f.out, r64.out).rel_l2, 1e-12);
}

TEST(Engine, ABlockZeroedOutsideTheSampleFailsAndIsNamed) {
  Fixture f;
  const auto plan = plan_blocks(f.c.problem, f.request(1 << 22).sample, f.c.seed, f.c.recipe.tile_kv);
  ASSERT_TRUE(std::none_of(plan.slices.begin(), plan.slices.end(), [](const Slice& s) { return s.h == 2 && s.r0 == 320; }));
  const auto o = f.out.view<float, 4>();
  for (std::int64_t i = 320; i < 384; ++i)
    for (std::int64_t d = 0; d < 64; ++d) o(0, i, 2, d) = 0.0f;
  const auto rep = judge(f.request(1 << 22));
  const auto& acc = rep.results[0].outcome;
  EXPECT_EQ(acc.verdict, Verdict::failed);
  EXPECT_NE(acc.reason.find("1 of 44 blocks of 64 rows outside the block rule"), std::string::npos) << acc.reason;
  // The block is emulated itself and fails the gate's rule on its own rows: a confirmed failure.
  EXPECT_NE(acc.reason.find("confirmed by the block's own emulation: batch 0 head 2 rows 320-383"), std::string::npos)
      << acc.reason;
  const auto& conf = acc.figures.at("blocks").at("confirmation");
  EXPECT_EQ(conf.at("emulated"), 1);
  EXPECT_NE(conf.at("blocks").at(0).at("verdict"), "passed");  // mistrusted: the block is all zero
  EXPECT_EQ(conf.at("blocks").at(0).at("at").at("rows").at(0), 320);
  EXPECT_EQ(rep.results[1].outcome.verdict, Verdict::passed);  // bitwise sees the emulated rows only, and says so
  EXPECT_EQ(rep.exit_code, 1);
}

// A kernel whose error in every block is 1.45 x the emulator's there (FP64 + 1.45 (emulator - FP64)):
// within the gate's rule on any block's own rows (alpha = 1.5 for bf16), yet blocks
// whose own emulator error is larger than the sampled blocks' leave the sampled bound. The
// confirmation emulates those and clears them: no false alarm, and the figures say so.
TEST(Engine, BlocksOutsideTheSampledBoundThatPassOnTheirOwnBudgetAreCleared) {
  Fixture f;
  f.c.dist = datasets::Distribution::outlier;  // block-to-block spread of the emulator's own error
  f.in = datasets::generate_qkv(f.c.problem, f.c.dist, f.c.seed);
  const auto emu = ref::emulate(f.c.problem, f.c.recipe, f.in.q, f.in.k, f.in.v).out.contiguous();
  const auto r64 = ref::attention(f.c.problem, f.in.q, f.in.k, f.in.v, ref::Precision::fp64).out.contiguous();
  f.out = emu;
  float* o = f.out.data<float>();
  const float* e = emu.data<float>();
  for (std::int64_t i = 0; i < f.out.numel(); ++i) {
    const double r = r64.dtype() == DType::f64 ? r64.data<double>()[i] : r64.data<float>()[i];
    o[i] = static_cast<float>(r + 1.45 * (static_cast<double>(e[i]) - r));
  }
  auto req = f.request(1 << 21);
  req.checks = {"accuracy"};
  const auto rep = judge(req);
  const auto& acc = rep.results[0].outcome;
  EXPECT_EQ(acc.verdict, Verdict::passed) << acc.reason;
  const auto& blocks = acc.figures.at("blocks");
  ASSERT_GT(blocks.at("failed").get<int>(), 0) << "no block left the sampled bound: the test shows nothing";
  const auto& conf = blocks.at("confirmation");
  EXPECT_GE(conf.at("emulated").get<int>(), 1);
  EXPECT_EQ(conf.at("beyond_extended_bound"), 0);
  for (const auto& b : conf.at("blocks")) {
    EXPECT_EQ(b.at("verdict"), "passed");
    EXPECT_GT(b.at("rel_l2").get<double>(), blocks.at("rule").at("bound_rel_l2").get<double>());
    EXPECT_LE(b.at("rel_l2").get<double>(), b.at("own_bound_rel_l2").get<double>());
  }
}

TEST(Engine, CallLogJudgesRerunsAliasesAndTheInputGuard) {
  Fixture f;
  Tensor same = f.out.contiguous(), flipped = f.out.contiguous();
  flipped.view<float, 4>()(0, 9, 3, 5) += 0.25f;
  CallLog log(false, nullptr);
  const std::vector<std::pair<std::string, TensorRef>> ins{{"q", ref_of(f.in.q)}, {"k", ref_of(f.in.k)}};
  log.fingerprint("before call 1", ins);
  log.compare("determinism", "call 2", ref_of(f.out), ref_of(same));
  log.compare("determinism", "call 3", ref_of(f.out), ref_of(flipped));
  log.compare("call_path", "contig", ref_of(f.out), ref_of(f.out));  // the same buffer: proves nothing
  f.in.k.view<float, 4>()(0, 0, 0, 0) *= 0.5f;
  log.fingerprint("call 3", ins);
  const auto rows = log.finish(f.c);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].check, "determinism");
  EXPECT_EQ(rows[0].outcome.verdict, Verdict::failed);
  EXPECT_EQ(rows[0].outcome.reason.rfind("call 3: 1 of 179200 output elements differ bitwise from the first call; first at [0,9,3,5]", 0),
            0u)
      << rows[0].outcome.reason;
  EXPECT_EQ(rows[1].outcome.verdict, Verdict::unsupported);
  EXPECT_EQ(rows[2].check, "input_guard");
  EXPECT_EQ(rows[2].outcome.verdict, Verdict::failed);
  EXPECT_NE(rows[2].outcome.reason.find("call 3: the callable wrote into its input k "), std::string::npos) << rows[2].outcome.reason;
  EXPECT_THROW(log.finish(f.c), Error);
}

TEST(Engine, ChecksumSeesAnyOneElementAndNotTheLayout) {
  Fixture f;
  const auto a = checksum(ref_of(f.in.v));
  // The same logical tensor in another memory order: the same fingerprint.
  const Tensor bhsd = f.in.v.permute({0, 2, 1, 3}).contiguous();
  EXPECT_EQ(checksum(ref_of(bhsd.permute({0, 2, 1, 3}))), a);
  Tensor w = f.in.v.contiguous();
  w.view<float, 4>()(0, 699, 3, 63) = -w.view<float, 4>()(0, 699, 3, 63);
  EXPECT_NE(checksum(ref_of(w)), a);
}

// The gate's device oracles (CheckOptions::device_oracles): a case the engine refuses is left to
// the host with the reason; a build without a GPU backend refuses the whole run up front (one
// input error, never rows), and judge_on_device says why it cannot run.
TEST(Engine, DeviceOraclesRefuseWhatTheEngineDoesNotTakeAndNeedAGpuBuild) {
  Fixture f;
  Case q = f.c;
  q.recipe = parse_recipe("sage_int8_fp8_perblock");
  q.recipe.v = parse_scheme("fp8_e4m3fn:per_token");  // a per-token V scale: not modelled
  std::string why;
  SampleArgs sa;
  EXPECT_FALSE(judge_on_device(q, "accuracy", f.in.q, f.in.k, f.in.v, f.out, ToleranceTable::builtin(), sa, why));
  EXPECT_NE(why.find("per_tensor or per_channel"), std::string::npos) << why;
  if (has_device_backend()) GTEST_SKIP() << "this build has the device engine";
  EXPECT_THROW((void)judge_on_device(f.c, "accuracy", f.in.q, f.in.k, f.in.v, f.out, ToleranceTable::builtin(), sa, why),
               Error);
  GateOptions opt;
  opt.profile = Profile::load("cpu");
  opt.cases = CaseFile::load("smoke");
  opt.check.device_oracles = true;
  try {
    (void)run_gate(opt);
    ADD_FAILURE() << "run_gate ran with device oracles in a CPU build";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("ATTEST_GPU=none"), std::string::npos) << e.what();
  }
}

// ErrSums::add with a flush threshold, on closed-form values: counters on the values as given,
// then |r| and |t| below the threshold zero before the sums; threshold 0 changes no sum.
TEST(Engine, ErrSumsFlushCountsThenFlushesBelowTheThreshold) {
  const double fb = std::ldexp(1.0, -126);
  const std::vector<std::pair<double, double>> pairs{
      {0.0, std::ldexp(1.0, -130)},                     // flushed subnormal
      {std::ldexp(1.0, -131), std::ldexp(1.0, -130)},   // kept subnormal: out of the error too
      {0.0, std::ldexp(1.0, -124)},                     // a normal output flushed: flushed_normal
      {0.0, -1.5 * fb},                                 // between the threshold and twice it: not flushed_normal
      {std::ldexp(1.0, -125), -std::ldexp(1.0, -127)},  // r flushed, t normal: error |t|
      {0.0, 0.0},
      {std::nan(""), std::ldexp(1.0, -130)},
      {1.0, std::numeric_limits<double>::infinity()}};
  ErrSums f, n;
  for (const auto& [t, r] : pairs) f.add(t, r, fb), n.add(t, r);
  EXPECT_EQ(f.count, 8);
  EXPECT_EQ(f.nonzero_ref, 6);
  EXPECT_EQ(f.zero_test, 3);
  EXPECT_EQ(f.flushed_normal, 1);
  EXPECT_EQ(f.nonfinite_ref, 1);
  EXPECT_EQ(f.nonfinite_test, 1);
  // Sums over the finite pairs after the flush: (0, 0), (0, 0), (0, 2^-124), (0, -1.5 fb), (2^-125, 0), (0, 0).
  const double a = std::ldexp(1.0, -124), b = 1.5 * fb, c = std::ldexp(1.0, -125);
  EXPECT_EQ(f.max_abs, a);
  EXPECT_EQ(f.ref_max, a);
  EXPECT_EQ(f.sum_abs, a + b + c);
  EXPECT_EQ(f.sum_sq, a * a + b * b + c * c);
  EXPECT_EQ(f.ref_sq, a * a + b * b);
  EXPECT_EQ(f.test_sq, c * c);
  EXPECT_EQ(f.dot, 0.0);
  // Without the threshold: the same counters but flushed_normal, and every value in the sums.
  EXPECT_EQ(n.nonzero_ref, 6);
  EXPECT_EQ(n.zero_test, 3);
  EXPECT_EQ(n.flushed_normal, 0);
  const double s1 = std::ldexp(1.0, -130), s2 = std::ldexp(1.0, -131), s3 = std::ldexp(1.0, -127);
  EXPECT_EQ(n.ref_sq, s1 * s1 + s1 * s1 + a * a + b * b + s3 * s3);
  EXPECT_EQ(n.sum_sq, s1 * s1 + (s1 - s2) * (s1 - s2) + a * a + b * b + (c + s3) * (c + s3));
  EXPECT_EQ(n.dot, s2 * s1 - c * s3);
  ErrSums m = f;
  m.merge(f);
  EXPECT_EQ(m.nonzero_ref, 12);
  EXPECT_EQ(m.zero_test, 6);
  EXPECT_EQ(m.flushed_normal, 2);
}

// A kernel that flushes to zero (FTZ) on V scaled down: heads 0-1 by 2^-130 (every output
// subnormal), heads 2-3 by 2^-112 (normal outputs, a few near 2^-126). Its output is the FP64
// reference with |x| < 2^-126 set to zero, cast to float.
struct FtzFixture : Fixture {
  Tensor r64;
  FtzFixture(int normal_scale = -112) {
    const auto v = in.v.view<float, 4>();
    for (std::int64_t s = 0; s < 700; ++s)
      for (std::int64_t h = 0; h < 4; ++h)
        for (std::int64_t d = 0; d < 64; ++d) v(0, s, h, d) = std::ldexp(v(0, s, h, d), h < 2 ? -130 : normal_scale);
    r64 = ref::attention(c.problem, in.q, in.k, in.v, ref::Precision::fp64).out.contiguous();
    out = Tensor(DType::f32, {1, 700, 4, 64});
    for (std::int64_t i = 0; i < out.numel(); ++i) {
      const double r = r64.data<double>()[i];
      out.data<float>()[i] = std::fabs(r) < kFlush ? std::copysign(0.0f, static_cast<float>(r)) : static_cast<float>(r);
    }
  }
  static constexpr double kFlush = 1.17549435082228750797e-38;  // 2^-126
  JudgeRequest ftz(double flush_below) const {
    JudgeRequest r = request(1 << 22);  // a sample: the block rule and its confirmation carry the verdict
    r.checks = {"accuracy"};
    r.flush_below = flush_below;
    return r;
  }
  // Outputs whose FP64 reference is finite and not zero, and those of them the kernel wrote as 0.
  std::pair<std::int64_t, std::int64_t> counts() const {
    std::int64_t nonzero = 0, zero = 0;
    for (std::int64_t i = 0; i < out.numel(); ++i) {
      const double r = r64.data<double>()[i];
      if (!std::isfinite(r) || r == 0) continue;
      ++nonzero;
      zero += out.data<float>()[i] == 0.0f;
    }
    return {nonzero, zero};
  }
};

TEST(Engine, FtzKernelPassesAgainstFlushedReferencesAndFailsWithout) {
  FtzFixture f;
  const auto [nonzero, zero] = f.counts();
  ASSERT_GT(zero, 2 * 700 * 64) << "heads 0-1 should be flushed whole";
  ASSERT_LT(zero, nonzero) << "heads 2-3 should keep normal outputs";
  const auto rep = judge(f.ftz(FtzFixture::kFlush));
  const auto& acc = rep.results.at(0).outcome;
  EXPECT_EQ(acc.verdict, Verdict::passed) << acc.reason;
  const auto& whole = acc.figures.at("blocks").at("whole");
  EXPECT_EQ(whole.at("ref_nonzero").get<std::int64_t>(), nonzero);
  EXPECT_EQ(whole.at("zero_where_ref_nonzero").get<std::int64_t>(), zero);
  EXPECT_EQ(whole.at("flushed_normal").get<std::int64_t>(), 0);
  EXPECT_EQ(rep.sample.at("flush_below").get<double>(), FtzFixture::kFlush);
  // Today's rule without the declaration: the flushed heads are 100% off (confirmed by their own emulation).
  const auto plain = judge(f.ftz(0));
  const auto& pacc = plain.results.at(0).outcome;
  EXPECT_EQ(pacc.verdict, Verdict::failed) << pacc.reason;
  EXPECT_NE(pacc.reason.find("outside the block rule"), std::string::npos) << pacc.reason;
  EXPECT_EQ(pacc.figures.at("blocks").at("whole").at("zero_where_ref_nonzero").get<std::int64_t>(), zero);
  EXPECT_FALSE(pacc.figures.at("blocks").at("whole").contains("flushed_normal"));
}

// Every output subnormal: nothing is left to the accuracy rule once flushed (the host's judge_ftz
// passes such a case on its element rule); a kernel that writes normal values there fails.
TEST(Engine, FtzEveryOutputFlushedPassesAndNormalValuesThereFail) {
  FtzFixture f(-130);
  const auto [nonzero, zero] = f.counts();
  ASSERT_EQ(zero, nonzero);
  const auto rep = judge(f.ftz(FtzFixture::kFlush));
  EXPECT_EQ(rep.results.at(0).outcome.verdict, Verdict::passed) << rep.results.at(0).outcome.reason;
  EXPECT_EQ(rep.results.at(0).outcome.figures.at("blocks").at("whole").at("zero_where_ref_nonzero").get<std::int64_t>(),
            zero);
  EXPECT_NE(judge(f.ftz(0)).results.at(0).outcome.verdict, Verdict::passed);
  // Rows 0-63 of head 0 (emulated: block 0 of (0, 0) is always planned) written as 2^-120.
  for (std::int64_t i = 0; i < 64; ++i) f.out.view<float, 4>()(0, i, 0, 7) = std::ldexp(1.0f, -120);
  const auto rb = judge(f.ftz(FtzFixture::kFlush));
  const auto& bad = rb.results.at(0).outcome;
  EXPECT_EQ(bad.verdict, Verdict::failed) << bad.reason;
}

// A kernel that keeps its subnormal outputs while declaring ftz (allowed: flushed or kept)
// passes too: its |x| < 2^-126 count as zero, as the reference's.
TEST(Engine, FtzDeclaredKernelThatKeepsSubnormalsPasses) {
  FtzFixture f;
  for (std::int64_t i = 0; i < f.out.numel(); ++i) f.out.data<float>()[i] = static_cast<float>(f.r64.data<double>()[i]);
  const auto [nonzero, zero] = f.counts();
  const auto rep = judge(f.ftz(FtzFixture::kFlush));
  const auto& acc = rep.results.at(0).outcome;
  EXPECT_EQ(acc.verdict, Verdict::passed) << acc.reason;
  EXPECT_EQ(acc.figures.at("blocks").at("whole").at("zero_where_ref_nonzero").get<std::int64_t>(), zero);
  EXPECT_LT(zero, nonzero / 100);  // float32 keeps nearly every 2^-130-scaled output
}

// A flushing kernel flushes inputs, products and partial sums too: a zero output whose FP64
// value is normal but below 2 (T + 1) 2^-126 is the flush's (passes, counted in flushed_normal);
// a zero at or beyond that bound cannot be (fails with the ftz message, though too small to move
// the accuracy rule).
TEST(Engine, FtzZeroOutputsBeyondWhatFlushingCanRemoveFail) {
  const double bound = 2.0 * (700 + 1) * FtzFixture::kFlush;
  // Normal-range zeros under the bound: heads 2-3 scaled so that some outputs fall between 2^-125 and it.
  {
    FtzFixture f(-118);
    std::int64_t zeroed = 0;
    std::set<std::int64_t> blocks_used;  // one per (64-row block, head): each a small part of its block
    for (std::int64_t i = 0; i < f.out.numel(); ++i) {
      const double r = std::fabs(f.r64.data<double>()[i]);
      const std::int64_t blk = (i / (4 * 64)) / 64 * 4 + (i / 64) % 4;
      if (r >= 2 * FtzFixture::kFlush && r < 4 * FtzFixture::kFlush && zeroed < 20 && blocks_used.insert(blk).second)
        f.out.data<float>()[i] = 0.0f, ++zeroed;
    }
    ASSERT_EQ(zeroed, 20);
    const auto rep = judge(f.ftz(FtzFixture::kFlush));
    const auto& acc = rep.results.at(0).outcome;
    EXPECT_EQ(acc.verdict, Verdict::passed) << acc.reason;
    EXPECT_GE(acc.figures.at("blocks").at("whole").at("flushed_normal").get<std::int64_t>(), 20);
    EXPECT_LT(acc.figures.at("blocks").at("ftz_zero_rule").at("largest_fp64_of_a_zero_output").get<double>(), bound);
  }
  // A whole 64-row block of normal-range outputs under the bound written as 0 (head 2, rows
  // 64-127): each zero counts as flushed, its reference with it, so the block's own error is 0 --
  // not the 100% a plain comparison would give it.
  {
    FtzFixture f(-118);
    std::int64_t zeroed = 0;
    for (std::int64_t s = 64; s < 128; ++s)
      for (std::int64_t d = 0; d < 64; ++d) {
        const std::int64_t i = (s * 4 + 2) * 64 + d;
        ASSERT_LT(std::fabs(f.r64.data<double>()[i]), bound);
        zeroed += std::fabs(f.r64.data<double>()[i]) >= 2 * FtzFixture::kFlush;
        f.out.data<float>()[i] = 0.0f;
      }
    ASSERT_GT(zeroed, 1000);  // mostly normal-range values
    const auto rep = judge(f.ftz(FtzFixture::kFlush));
    const auto& acc = rep.results.at(0).outcome;
    EXPECT_EQ(acc.verdict, Verdict::passed) << acc.reason;
    EXPECT_EQ(acc.figures.at("blocks").at("failed").get<std::int64_t>(), 0);
  }
  FtzFixture f(-100);  // heads 2-3 around 2^-104: a zero of the bound's size is tiny against its block
  std::int64_t pick = -1;
  for (std::int64_t i = 0; i < f.out.numel(); ++i) {
    const double r = std::fabs(f.r64.data<double>()[i]);
    if (r >= bound && (pick < 0 || r < std::fabs(f.r64.data<double>()[pick]))) pick = i;
  }
  ASSERT_GE(pick, 0);
  f.out.data<float>()[pick] = 0.0f;
  const std::int64_t row = (pick / (4 * 64)), head = (pick / 64) % 4, r0 = row / 64 * 64;
  const auto rep = judge(f.ftz(FtzFixture::kFlush));
  const auto& acc = rep.results.at(0).outcome;
  EXPECT_EQ(acc.verdict, Verdict::failed) << acc.reason;
  EXPECT_EQ(acc.reason, fmt::format("ftz declared, yet outputs came back 0 whose FP64 reference is beyond what flushing "
                                    "can remove, 2 (T + 1) 2^-126 = {:.4g}: largest {:.4g}, in 1 blocks (first: batch 0 "
                                    "head {} rows {}-{})",
                                    bound, std::fabs(f.r64.data<double>()[pick]), head, r0,
                                    std::min<std::int64_t>(r0 + 63, 699)));
  EXPECT_EQ(acc.figures.at("blocks").at("whole").at("flushed_normal").get<std::int64_t>(), 1);
  EXPECT_EQ(acc.figures.at("blocks").at("failed").get<std::int64_t>(), 0);  // the accuracy rule alone would pass
}

// Quantized recipes (Sage INT8 per block with K smoothing, FP8 per tensor): scales over rows,
// heads and the whole tensor, so the engine emulates its blocks against the whole problem's
// quantized operands. The kernel under test is the emulator's whole-problem output stored as the
// recipe's out format (bf16), on a GQA problem with a causal mask.
struct QuantFixture {
  Case c;
  datasets::Qkv in;
  Tensor out;  // bf16 [B,S,H,Dv]
  explicit QuantFixture(const char* recipe) {
    c.kernel = "test.emulator";
    c.recipe = parse_recipe(recipe);
    c.problem = parse_problem("b1h4k2s700d64:mask=causal_tl");
    in = datasets::generate_qkv(c.problem, c.dist, c.seed);
    const Tensor e = ref::emulate(c.problem, c.recipe, in.q, in.k, in.v).out.contiguous();
    out = Tensor(DType::bf16, e.shape());
    for (std::int64_t i = 0; i < e.numel(); ++i) {
      const float x = e.data<float>()[i];
      EXPECT_EQ(ref::round_to(FormatId::bf16, x), x);  // out=bf16: stored as it is
      const std::uint16_t code = ref::encode(FormatId::bf16, x);
      std::memcpy(out.raw() + 2 * i, &code, 2);
    }
  }
  JudgeRequest request(double macs) const { return request_for(c, in, out, macs); }
};

TEST(Engine, QuantizedRecipesAreEmulatedAgainstTheWholeProblem) {
  for (const char* name : {"sage_int8_fp8_perblock", "fp8_fp8"}) {
    QuantFixture f(name);
    ASSERT_EQ(refusal(f.c, SampleArgs{}), "") << name;
    // Every block emulated, then a sample of 4 of 44: the emulated rows are the whole emulation's
    // rows bit for bit (the kernel is that emulation), so bitwise and accuracy pass on both.
    for (const double macs : {1e12, double(1 << 22)}) {
      const auto rep = judge(f.request(macs));
      ASSERT_EQ(rep.results.size(), 2u);
      EXPECT_EQ(rep.results[0].outcome.verdict, Verdict::passed) << name << ": " << rep.results[0].outcome.reason;
      EXPECT_EQ(rep.results[1].outcome.verdict, Verdict::passed) << name << ": " << rep.results[1].outcome.reason;
      EXPECT_EQ(rep.sample.at("complete").get<bool>(), macs > 1e9) << name;
      const std::int64_t rows = rep.sample.at("rows_sampled").get<std::int64_t>();
      EXPECT_EQ(rep.results[1].outcome.figures.at("out").at("count").get<std::int64_t>(), rows * 64) << name;
      if (macs < 1e9) {
        EXPECT_LT(rows, 4 * 700) << name;
      }
      EXPECT_NE(rep.sample.at("emulation").at("quantization").get<std::string>().find("whole problem"),
                std::string::npos);
      EXPECT_EQ(rep.sample.at("emulation").at("prepared_bytes").get<std::int64_t>(),
                ref::prepared_bytes(f.c.problem, f.c.recipe));
      EXPECT_EQ(rep.results[0].outcome.figures.at("blocks").at("failed"), 0) << name;
    }
  }
}

// One 64-row block of one head zeroed. Sampled: outside the emulated blocks, the block rule finds
// it and its own emulation (against the whole problem's operands) confirms it, naming it.
// Complete: bitwise names its first element.
TEST(Engine, QuantizedRecipeWithABlockZeroedFailsNamingIt) {
  for (const char* name : {"sage_int8_fp8_perblock", "fp8_fp8"}) {
    QuantFixture f(name);
    const auto plan = plan_blocks(f.c.problem, f.request(1 << 22).sample, f.c.seed, f.c.recipe.tile_kv);
    ASSERT_TRUE(
        std::none_of(plan.slices.begin(), plan.slices.end(), [](const Slice& s) { return s.h == 2 && s.r0 == 320; }));
    for (std::int64_t i = 320; i < 384; ++i) std::memset(f.out.raw() + 2 * ((i * 4 + 2) * 64), 0, 2 * 64);
    const auto rep = judge(f.request(1 << 22));
    const auto& acc = rep.results[0].outcome;
    EXPECT_EQ(acc.verdict, Verdict::failed) << name;
    EXPECT_NE(acc.reason.find("1 of 44 blocks of 64 rows outside the block rule"), std::string::npos)
        << name << ": " << acc.reason;
    EXPECT_NE(acc.reason.find("confirmed by the block's own emulation: batch 0 head 2 rows 320-383"), std::string::npos)
        << name << ": " << acc.reason;
    EXPECT_EQ(rep.results[1].outcome.verdict, Verdict::passed) << name;  // the zeroed block is not among the sampled
    const auto whole = judge(f.request(1e12));
    EXPECT_EQ(whole.results[0].outcome.verdict, Verdict::failed) << name;
    const auto& bw = whole.results[1].outcome;
    EXPECT_EQ(bw.verdict, Verdict::failed) << name;
    EXPECT_NE(bw.reason.find("first at [0,320,2,0]"), std::string::npos) << name << ": " << bw.reason;
  }
}

TEST(Engine, RecipeRefusalTakesEveryNamedRecipeAndRefusesWhatTheEmulatorDoesNotModel) {
  for (const auto& n : named_recipes()) EXPECT_EQ(recipe_refusal(parse_recipe(n.name)), "") << n.name;
  Recipe r = parse_recipe("sage_int8_fp8_perblock");
  r.v = parse_scheme("fp8_e4m3fn:per_token");
  EXPECT_NE(recipe_refusal(r).find("per_tensor or per_channel"), std::string::npos) << recipe_refusal(r);
  r = parse_recipe("mxfp4_fp4");
  r.tile_kv = 48;
  EXPECT_NE(recipe_refusal(r).find("multiple"), std::string::npos) << recipe_refusal(r);
  r = parse_recipe("bf16");
  r.exp2 = Exp2Policy::hw;  // taken: emulated with exp2=cr, bitwise unsupported
  EXPECT_EQ(recipe_refusal(r), "");
  // The case's problem: a Hadamard rotation over 128 channels on head_dim 64.
  Case c;
  c.recipe = parse_recipe("mxfp4_fp8_had");
  c.problem = parse_problem("b1h2s256d64");
  EXPECT_NE(refusal(c, SampleArgs{}).find("on problem b1h2s256d64"), std::string::npos) << refusal(c, SampleArgs{});
  c.problem = parse_problem("b1h2s256d128");
  EXPECT_EQ(refusal(c, SampleArgs{}), "");
  // Host memory of the whole-problem preparation: a long Sage problem fits the default limit;
  // a lower limit refuses it with the figure; casts need none.
  const Problem big = parse_problem("b1h40s75600d128");
  const Recipe sage = parse_recipe("sage_int8_fp8_perblock");
  const double n = 75600.0 * 40 * 128;
  EXPECT_GE(prepare_host_bytes(big, sage), 5 * n);
  EXPECT_LT(prepare_host_bytes(big, sage), SampleArgs{}.max_host_bytes);
  EXPECT_EQ(prepare_host_bytes(big, parse_recipe("bf16")), 0);
  c.recipe = sage;
  c.problem = big;
  SampleArgs small;
  small.max_host_bytes = 4.0 * 1024 * 1024 * 1024;
  EXPECT_EQ(refusal(c, SampleArgs{}), "");
  EXPECT_NE(refusal(c, small).find("GiB for problem b1h40s75600d128"), std::string::npos) << refusal(c, small);
}

}  // namespace
}  // namespace attest::conformance::engine
