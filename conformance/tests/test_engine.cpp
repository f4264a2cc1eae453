// The conformance engine (engine.hpp) on host tensors: the same code path that judges device
// buffers, fed host memory. The kernel under test is the recipe emulator itself (bitwise the
// recipe by construction); planted bugs edit its output. Oracles: metrics::compare (an
// independent implementation of rel_l2), closed-form fingerprints of edited tensors.
#include <gtest/gtest.h>

#include <algorithm>
#include <tuple>

#include "attest/conformance/engine.hpp"
#include "attest/conformance/gate.hpp"
#include "attest/core/status.hpp"
#include "attest/core/recipe.hpp"
#include "attest/datasets/distributions.hpp"
#include "attest/metrics/tensor_metrics.hpp"
#include "attest/reference/attention.hpp"
#include "attest/reference/emulate.hpp"

namespace attest::conformance::engine {
namespace {

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
  JudgeRequest request(double macs) const {
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
  std::string why;
  SampleArgs sa;
  EXPECT_FALSE(judge_on_device(q, "accuracy", f.in.q, f.in.k, f.in.v, f.out, ToleranceTable::builtin(), sa, why));
  EXPECT_NE(why.find("element-wise cast"), std::string::npos) << why;
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

}  // namespace
}  // namespace attest::conformance::engine
