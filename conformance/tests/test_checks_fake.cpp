// The checks on fake kernels built from the recipe emulator (tests may use the reference): an
// honest one passes every check; each planted defect is caught by the check written for it.
// kern's mutants (conformance_mutation) cover the tiled engine's bugs; these cover what no
// mutant plants: claiming unsupported problems, NaN leaking across rows, NaN in masked rows.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "attest/conformance/check.hpp"
#include "attest/conformance/gate.hpp"
#include "attest/core/status.hpp"

namespace attest::conformance {
namespace {

enum class Defect { none, accepts_all, nan_leak, masked_nan };

class FakeKernel final : public kernels::Kernel {
 public:
  FakeKernel(std::string name, Defect d, std::vector<std::string> recipes, bool planted = false)
      : name_(std::move(name)), defect_(d), recipes_(std::move(recipes)), planted_(planted) {}
  std::string name() const override { return name_; }
  std::string backend() const override { return "cpu"; }
  std::vector<std::string> recipes() const override { return recipes_; }
  std::vector<std::string> configs() const override { return {"", "twin"}; }
  kernels::Capabilities capabilities() const override {
    kernels::Capabilities c;
    c.bitwise = true;
    c.gqa = false;  // declared, so refusal has something to check
    c.planted_bug = planted_;
    return c;
  }
  Status supports(const Problem& p, const Recipe& r) const override {
    if (defect_ == Defect::accepts_all) return Status::ok();
    return Kernel::supports(p, r);
  }
  void run(const kernels::Args& a) override {
    if (auto st = supports(a.problem, a.recipe); !st) throw Error(name_ + ": " + st.reason());
    const Tensor q = a.q.contiguous(), k = a.k.contiguous(), v = a.v.contiguous();
    auto e = ref::emulate(a.problem, a.recipe, q, k, v);
    const Problem& p = a.problem;
    if (defect_ == Defect::nan_leak) {
      bool any = false;
      for (const Tensor* t : {&q, &k, &v})
        for (std::int64_t i = 0; i < t->numel(); ++i) any = any || std::isnan(t->data<float>()[i]);
      if (any)
        for (std::int64_t i = 0; i < e.out.numel(); ++i) e.out.data<float>()[i] = std::numeric_limits<float>::quiet_NaN();
    }
    if (defect_ == Defect::masked_nan) {
      const auto o = e.out.view<float, 4>();
      for (std::int64_t b = 0; b < p.batch; ++b)
        for (std::int64_t i = 0; i < p.len_q(b); ++i)
          if (p.visible_keys(b, i) <= 0)
            for (std::int64_t h = 0; h < p.heads_q; ++h)
              for (std::int64_t d = 0; d < p.head_dim_v; ++d)
                o(p.ragged() ? 0 : b, p.ragged() ? p.cu_seqlens_q[static_cast<std::size_t>(b)] + i : i, h, d) = NAN;
    }
    copy_values(e.out, a.out);
    if (a.lse) copy_values(e.lse, *a.lse);
  }

 private:
  std::string name_;
  Defect defect_;
  std::vector<std::string> recipes_;
  bool planted_;
};

ATTEST_REGISTER_KERNELS([] {
  std::vector<std::unique_ptr<kernels::Kernel>> v;
  v.push_back(std::make_unique<FakeKernel>("fake.good", Defect::none, std::vector<std::string>{"bf16", "f32"}));
  v.push_back(std::make_unique<FakeKernel>("fake.other", Defect::none, std::vector<std::string>{"bf16"}));
  v.push_back(std::make_unique<FakeKernel>("fake.accepts_all", Defect::accepts_all, std::vector<std::string>{"bf16"}));
  v.push_back(std::make_unique<FakeKernel>("fake.nan_leak", Defect::nan_leak, std::vector<std::string>{"bf16"}));
  v.push_back(std::make_unique<FakeKernel>("fake.masked_nan", Defect::masked_nan, std::vector<std::string>{"bf16"}));
  v.push_back(std::make_unique<FakeKernel>("mutant.fake", Defect::nan_leak, std::vector<std::string>{"bf16"}, true));
  return v;
});

std::map<std::string, Verdict> run_all(const std::string& kernel, const std::string& problem, const char* dist = "normal") {
  const Case c = parse_case("kernel=" + kernel + " recipe=bf16 problem=" + problem + " dist=" + dist + " seed=1");
  std::map<std::string, Verdict> out;
  for (const auto& r : run_cases({c}, ToleranceTable::builtin(), {})) {
    out[r.check] = r.outcome.verdict;
    if (kernel == "fake.good") {
      EXPECT_TRUE(verdict_ok(r.outcome.verdict)) << r.check << ": " << r.outcome.reason << "\n" << r.descriptor;
    }
  }
  return out;
}

TEST(ChecksOnFakes, AnHonestKernelPassesEveryCheck) {
  for (const char* p : {"b1h2s40t72d32", "b2h2s33t20d16:mask=causal_br:layout=bhsd", "b2h1s20t17d16:cu_q=0,20,25:cu_kv=0,17,20"}) {
    const auto v = run_all("fake.good", p);
    EXPECT_EQ(v.size(), all_checks().size());
    EXPECT_EQ(v.at("bitwise"), Verdict::passed) << p;
    EXPECT_EQ(v.at("refusal"), Verdict::passed) << p;
  }
}

TEST(ChecksOnFakes, ClaimingAnExcludedProblemFailsRefusal) {
  const auto v = run_all("fake.accepts_all", "b1h2s16d16");
  EXPECT_EQ(v.at("refusal"), Verdict::failed);
  EXPECT_EQ(v.at("bitwise"), Verdict::passed);
}

TEST(ChecksOnFakes, NanLeakingAcrossRowsFailsNonfinite) {
  const auto v = run_all("fake.nan_leak", "b1h2s24t40d16:mask=causal_tl");
  EXPECT_EQ(v.at("nonfinite"), Verdict::failed);
  EXPECT_EQ(v.at("accuracy"), Verdict::passed);
}

TEST(ChecksOnFakes, NanInFullyMaskedRowsFailsMaskedRows) {
  const auto v = run_all("fake.masked_nan", "b1h2s24t40d16");
  EXPECT_EQ(v.at("masked_rows"), Verdict::failed);
  EXPECT_EQ(v.at("bitwise"), Verdict::passed);  // the case problem itself has no masked row
}

TEST(ChecksOnFakes, RefusedCaseIsUnsupportedWithTheKernelsReason) {
  const Case c = parse_case("kernel=fake.good recipe=bf16 problem=b1h4k2s16d16 dist=normal seed=1 check=accuracy");
  const auto r = run_cases({c}, ToleranceTable::builtin(), {});
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].outcome.verdict, Verdict::unsupported);
  EXPECT_NE(r[0].outcome.reason.find("GQA"), std::string::npos) << r[0].outcome.reason;
}

TEST(ChecksOnFakes, AccuracyFiguresCarryBudgetFloorAndBound) {
  const Case c = parse_case("kernel=fake.good recipe=bf16 problem=b1h2s64t96d32 dist=diffusion seed=2 check=accuracy");
  const auto r = run_cases({c}, ToleranceTable::builtin(), {});
  ASSERT_EQ(r.size(), 1u);
  const auto& m = r[0].outcome.figures["judgement"]["metrics"];
  for (const char* k : {"max_abs", "rel_l2", "lse_max_abs"}) {
    ASSERT_TRUE(m.contains(k)) << k;
    // The fake is the emulator: measured == budget exactly, bound = alpha budget + 2 floor + eps.
    EXPECT_EQ(m[k]["measured"], m[k]["budget"]) << k;
    EXPECT_DOUBLE_EQ(m[k]["bound"].get<double>(), m[k]["alpha"].get<double>() * m[k]["budget"].get<double>() +
                                                      2 * m[k]["floor"].get<double>() + m[k]["eps"].get<double>());
  }
  // The built-in bf16 row (docs/gate.md "The accuracy rule"): rel_l2 1.5, max_abs and LSE 2.
  EXPECT_EQ(m["rel_l2"]["alpha"].get<double>(), 1.5);
  EXPECT_EQ(m["max_abs"]["alpha"].get<double>(), 2.0);
  EXPECT_GT(m["rel_l2"]["budget"].get<double>(), 1e-4);  // bf16 roundings are in the budget
  EXPECT_GT(m["rel_l2"]["floor"].get<double>(), 0.0);    // the floor twin's order moves bits
}

TEST(Layouts, EveryLayoutHoldsTheSameLogicalValues) {
  const Problem p = parse_problem("b2h4k2s6d8");
  const auto in = datasets::generate_qkv(p, datasets::Distribution::normal, 3);
  for (Layout l : {Layout::bshd, Layout::bhsd, Layout::packed_qkv, Layout::strided}) {
    const auto li = make_inputs(p, in, l, 3, 5, 7);
    for (auto [a, b] : {std::pair{&in.q, &li.q}, {&in.k, &li.k}, {&in.v, &li.v}})
      EXPECT_EQ(metrics::bit_mismatch_count(*a, *b), 0) << layout_name(l);
  }
  // bhsd: head stride S*D, token stride D (hand-derived for [B,S,H,D] = [2,6,4,8]).
  EXPECT_EQ(make_inputs(p, in, Layout::bhsd, 0, 0, 0).q.strides(), (Shape{192, 8, 48, 1}));
  // packed: one row holds H + 2 Hkv = 8 heads; k starts after the 4 q heads.
  const auto pk = make_inputs(p, in, Layout::packed_qkv, 0, 0, 0);
  EXPECT_EQ(pk.k.strides(), (Shape{384, 64, 8, 1}));
  EXPECT_EQ(pk.k.offset(), 32);
  EXPECT_EQ(pk.v.offset(), 48);
  EXPECT_EQ(make_inputs(p, in, Layout::strided, 3, 0, 0).q.strides(), (Shape{264, 44, 11, 1}));
}

}  // namespace
}  // namespace attest::conformance
