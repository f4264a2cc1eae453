// Adding a check is one file: this binary defines `ext.convex` with ATTEST_REGISTER_CHECK (nothing
// else in the tree names it) and sees the registry, the glob selection and the gate engine pick
// it up, judging an honest kernel and a planted bug by a closed form.
//
// The property: softmax weights are non-negative and sum to one, so every output element is a
// convex combination of the visible V rows of its head and |out| <= max|v| exactly; rounding the
// output to f32 and the V operand to f32 (recipe f32) moves it by at most 2^-23 relative each,
// so the bound used is max|v| * (1 + 2^-20).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "attest/conformance/check.hpp"
#include "attest/conformance/gate.hpp"
#include "attest/core/status.hpp"
#include "attest/kernels/kernel.hpp"
#include "attest/reference/emulate.hpp"

namespace attest::conformance {
namespace {

class Convex final : public Check {
 public:
  std::string_view name() const override { return "ext.convex"; }
  std::string_view summary() const override { return "|out| <= max|v| (softmax weights are a convex combination)"; }
  Outcome run(Context& ctx) const override {
    const Tensor& v = ctx.inputs().v;
    const Tensor out = ctx.baseline().out.contiguous();
    double vmax = 0, omax = 0;
    for (std::int64_t i = 0; i < v.numel(); ++i) vmax = std::max(vmax, std::fabs(double(v.data<float>()[i])));
    for (std::int64_t i = 0; i < out.numel(); ++i) omax = std::max(omax, std::fabs(double(out.data<float>()[i])));
    const double bound = vmax * (1 + std::ldexp(1.0, -20));
    nlohmann::json fig{{"max_abs_out", omax}, {"max_abs_v", vmax}, {"bound", bound}};
    if (!(omax <= bound)) return {Verdict::failed, "max|out| " + std::to_string(omax) + " > max|v| bound " + std::to_string(bound), fig};
    return {Verdict::passed, {}, fig};
  }
};
ATTEST_REGISTER_CHECK([]() -> std::unique_ptr<Check> { return std::make_unique<Convex>(); });

// Honest: the recipe emulator. Planted bug: the softmax's division by its denominator left out,
// emulated as the honest output times exp(lse) = sum_j exp(s_j) (out = sum_j exp(s_j) v_j):
// larger than max|v| wherever that sum is large.
class Fake final : public kernels::Kernel {
 public:
  explicit Fake(bool unnormalised) : unnormalised_(unnormalised) {}
  std::string name() const override { return unnormalised_ ? "ext.fake.unnormalised" : "ext.fake.honest"; }
  std::string backend() const override { return "cpu"; }
  std::vector<std::string> recipes() const override { return {"f32"}; }
  kernels::Capabilities capabilities() const override { return {}; }
  void run(const kernels::Args& a) override {
    const Tensor q = a.q.contiguous(), k = a.k.contiguous(), v = a.v.contiguous();
    auto e = ref::emulate(a.problem, a.recipe, q, k, v);
    if (unnormalised_) {
      // out [B,S,H,Dv] and lse [B,H,S] (ragged: B = 1, S = total_q): indexed by their own extents.
      const auto o = e.out.view<float, 4>();
      const auto l = e.lse.view<float, 3>();
      for (std::int64_t b = 0; b < o.shape[0]; ++b)
        for (std::int64_t s = 0; s < o.shape[1]; ++s)
          for (std::int64_t h = 0; h < o.shape[2]; ++h)
            for (std::int64_t d = 0; d < o.shape[3]; ++d) o(b, s, h, d) *= std::exp(l(b, h, s));
    }
    copy_values(e.out, a.out);
    if (a.lse) copy_values(e.lse, *a.lse);
  }

 private:
  bool unnormalised_;
};
// A kernel that cannot run on this host at all (a GPU kernel without a device).
class Unavailable final : public kernels::Kernel {
 public:
  std::string name() const override { return "ext.unavailable"; }
  std::string backend() const override { return "cpu"; }
  std::vector<std::string> recipes() const override { return {"f32"}; }
  kernels::Capabilities capabilities() const override {
    kernels::Capabilities c;
    c.unavailable = "no such device on this host";
    return c;
  }
  void run(const kernels::Args&) override { throw Error("ext.unavailable: never runs"); }
};

ATTEST_REGISTER_KERNELS([] {
  std::vector<std::unique_ptr<kernels::Kernel>> v;
  v.push_back(std::make_unique<Fake>(false));
  v.push_back(std::make_unique<Fake>(true));
  v.push_back(std::make_unique<Unavailable>());
  return v;
});

TEST(CheckExtension, RegisteredAfterTheBuiltInsAndSelectable) {
  const auto all = all_checks();
  ASSERT_FALSE(all.empty());
  EXPECT_EQ(all.back()->name(), "ext.convex");
  EXPECT_EQ(find_check("ext.convex"), all.back());
  const auto m = match_checks("ext.*");
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0]->name(), "ext.convex");
  EXPECT_THROW(register_check(std::make_unique<Convex>()), Error);  // a second ext.convex
}

Result judge(const std::string& kernel) {
  const Case c = parse_case("kernel=" + kernel + " recipe=f32 problem=b1h2s48t200d32 dist=normal seed=3 check=ext.convex");
  const auto rs = run_cases({c}, ToleranceTable::builtin(), {});
  EXPECT_EQ(rs.size(), 1u);
  return rs.at(0);
}

TEST(CheckExtension, TheGateEngineRunsItOnAnHonestKernelAndAPlantedBug) {
  const Result honest = judge("ext.fake.honest");
  EXPECT_EQ(honest.check, "ext.convex");
  EXPECT_EQ(honest.outcome.verdict, Verdict::passed) << honest.outcome.reason;
  EXPECT_LE(honest.outcome.figures.at("max_abs_out").get<double>(), honest.outcome.figures.at("max_abs_v").get<double>());
  const Result bug = judge("ext.fake.unnormalised");
  EXPECT_EQ(bug.outcome.verdict, Verdict::failed);
  EXPECT_NE(bug.outcome.reason.find("> max|v| bound"), std::string::npos) << bug.outcome.reason;
}

TEST(CheckExtension, AGateSelectionByGlobReportsItsCoverage) {
  GateOptions o;
  o.profile.name = "ext";  // a profile over every registered kernel and recipe
  o.cases = CaseFile::load("smoke");
  o.selection = {"ext.fake.*", "f32", "ext.*"};
  const GateReport r = run_gate(o);
  std::size_t judged = 0;
  for (const auto& res : r.results) {
    EXPECT_EQ(res.check, "ext.convex");
    judged += res.outcome.verdict == Verdict::passed || res.outcome.verdict == Verdict::failed;
  }
  EXPECT_GT(judged, 0u);
  bool seen = false;
  for (const auto& c : r.coverage) seen = seen || (c.check == "ext.convex" && c.kernel == "ext.fake.honest" && c.passed == c.judged && c.judged > 0);
  EXPECT_TRUE(seen);
  EXPECT_EQ(r.exit_code(), 1);  // the unnormalised fake fails it
}

// Capabilities::unavailable: every case UNSUPPORTED with the reason (but refusal's, which judges
// supports() itself), no per-check coverage error, and one gate error naming the kernel and the
// reason: a GPU profile on a host without a usable GPU fails instead of passing on nothing.
TEST(CheckExtension, AnUnavailableKernelFailsTheGateOnceWithItsReason) {
  GateOptions o;
  o.profile.name = "ext";
  o.cases = CaseFile::load("smoke");
  o.selection = {"ext.unavailable", "f32", ""};
  const GateReport r = run_gate(o);
  ASSERT_FALSE(r.results.empty());
  for (const auto& res : r.results) {
    if (res.check == "refusal") continue;  // judges supports() itself, which needs no device
    EXPECT_EQ(res.outcome.verdict, Verdict::unsupported) << res.descriptor;
    EXPECT_EQ(res.outcome.reason, "no such device on this host") << res.descriptor;
  }
  for (const auto& c : r.coverage) EXPECT_FALSE(c.declared) << c.check;
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_EQ(r.errors[0], "kernel ext.unavailable is unavailable on this host (no such device on this host): none of its "
                         "cases could run");
  EXPECT_EQ(r.exit_code(), 1);
}

}  // namespace
}  // namespace attest::conformance
