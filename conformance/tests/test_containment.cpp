// Fault containment and the declarations that keep correct kernels free of false alarms, on fake
// kernels built from the recipe emulator: a KernelFault is one `fault` row; a call-time refusal
// (KernelRefused) is one failed `refusal` row with the case's other checks UNSUPPORTED pointing at
// it; ftz, row_align and causal_cross declared vs not; per-tensor layouts on an honest kernel.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "attest/conformance/check.hpp"
#include "attest/conformance/gate.hpp"
#include "attest/core/status.hpp"

namespace attest::conformance {
namespace {

enum class Mode { faults_on_bhsd, refuses_causal_cross, flushes, flushes_declared, aligned8, no_causal_cross };

class Fake final : public kernels::Kernel {
 public:
  Fake(std::string name, Mode m) : name_(std::move(name)), mode_(m) {}
  std::string name() const override { return name_; }
  std::string backend() const override { return "cpu"; }
  std::vector<std::string> recipes() const override { return {"bf16"}; }
  kernels::Capabilities capabilities() const override {
    kernels::Capabilities c;
    c.bitwise = true;
    c.ftz = mode_ == Mode::flushes_declared;
    c.row_align = mode_ == Mode::aligned8 ? 8 : 1;
    c.causal_cross = mode_ != Mode::no_causal_cross;
    return c;
  }
  void run(const kernels::Args& a) override {
    if (auto st = supports(a.problem, a.recipe); !st) throw Error(name_ + ": " + st.reason());
    // Hardware that needs aligned rows: the checks must never hand it unaligned ones.
    if (auto st = kernels::aligned_rows(capabilities(), a); !st) throw Error(name_ + ": unaligned call: " + st.reason());
    const Problem& p = a.problem;
    if (mode_ == Mode::faults_on_bhsd && p.layout == Layout::bhsd) throw kernels::KernelFault("CUDA error: misaligned address");
    if (mode_ == Mode::refuses_causal_cross && p.mask != Mask::none && p.seqlen_q != p.seqlen_kv)
      throw kernels::KernelRefused("No available kernel. Aborting execution.");
    const Tensor q = a.q.contiguous(), k = a.k.contiguous(), v = a.v.contiguous();
    auto e = ref::emulate(p, a.recipe, q, k, v);
    if (mode_ == Mode::flushes || mode_ == Mode::flushes_declared) {
      float* o = e.out.data<float>();
      for (std::int64_t i = 0; i < e.out.numel(); ++i)
        if (std::fabs(o[i]) < 1.17549435e-38f) o[i] = std::copysign(0.0f, o[i]);
    }
    copy_values(e.out, a.out);
    if (a.lse) copy_values(e.lse, *a.lse);
  }

 private:
  std::string name_;
  Mode mode_;
};

ATTEST_REGISTER_KERNELS([] {
  std::vector<std::unique_ptr<kernels::Kernel>> v;
  v.push_back(std::make_unique<Fake>("fake.faults_on_bhsd", Mode::faults_on_bhsd));
  v.push_back(std::make_unique<Fake>("fake.refuses_causal_cross", Mode::refuses_causal_cross));
  v.push_back(std::make_unique<Fake>("fake.flushes", Mode::flushes));
  v.push_back(std::make_unique<Fake>("fake.flushes_declared", Mode::flushes_declared));
  v.push_back(std::make_unique<Fake>("fake.aligned8", Mode::aligned8));
  v.push_back(std::make_unique<Fake>("fake.no_causal_cross", Mode::no_causal_cross));
  return v;
});

std::map<std::string, Result> run_all(const std::string& kernel, const std::string& problem, const std::string& check = "") {
  const Case c = parse_case("kernel=" + kernel + " recipe=bf16 problem=" + problem + " dist=normal seed=1" +
                            (check.empty() ? "" : " check=" + check));
  std::map<std::string, Result> out;
  for (auto& r : run_cases({c}, ToleranceTable::builtin(), {})) out[r.check] = r;
  return out;
}

TEST(FaultContainment, AFaultIsOneFaultRowAndEveryOtherVerdictIsValid) {
  const auto rs = run_all("fake.faults_on_bhsd", "b1h2s40t72d32");
  std::size_t faults = 0;
  for (const auto& [check, r] : rs) {
    if (r.outcome.verdict == Verdict::fault) {
      ++faults;
      EXPECT_EQ(check, "layout");
      EXPECT_NE(r.outcome.reason.find("kernel fake.faults_on_bhsd faulted on b1h2s40t72d32:layout=bhsd: CUDA error: "
                                      "misaligned address"),
                std::string::npos)
          << r.outcome.reason;
    } else {
      EXPECT_TRUE(verdict_ok(r.outcome.verdict)) << check << ": " << r.outcome.reason;
    }
  }
  EXPECT_EQ(faults, 1u);
  EXPECT_FALSE(verdict_ok(Verdict::fault));
  EXPECT_EQ(parse_verdict("fault"), Verdict::fault);
  // Another case of the same kernel: nothing carried over.
  for (const auto& [check, r] : run_all("fake.faults_on_bhsd", "b1h2s24d16:layout=bhsd"))
    EXPECT_TRUE(r.outcome.verdict == Verdict::fault || verdict_ok(r.outcome.verdict)) << check;
}

TEST(FaultContainment, ACallTimeRefusalIsOneFailedRefusalRow) {
  const auto rs = run_all("fake.refuses_causal_cross", "b1h2s40t72d32:mask=causal_br");
  std::size_t failed = 0;
  for (const auto& [check, r] : rs) {
    if (check == "refusal") {
      EXPECT_EQ(r.outcome.verdict, Verdict::failed);
      EXPECT_EQ(r.outcome.reason,
                "refuses at call time a case inside its declared capabilities: No available kernel. Aborting execution.");
      failed += r.outcome.verdict == Verdict::failed;
    } else {
      EXPECT_EQ(r.outcome.verdict, Verdict::unsupported) << check << ": " << r.outcome.reason;
    }
  }
  EXPECT_EQ(failed, 1u);
  for (const char* check : {"accuracy", "layout", "poison", "nonfinite"})
    EXPECT_EQ(rs.at(check).outcome.reason,
              "refused at call time: No available kernel. Aborting execution. (judged by the refusal row)");
  // S == T: the case itself runs; masked_rows' causal_br cross variant (admitted by supports())
  // is refused at call time, so that refusal is judged once by the refusal row and the checks
  // after it in the case are unsupported: never more than one non-ok row.
  std::size_t bad = 0;
  for (const auto& [check, r] : run_all("fake.refuses_causal_cross", "b1h2s40d32:mask=causal_br")) {
    bad += !verdict_ok(r.outcome.verdict);
    if (!verdict_ok(r.outcome.verdict)) {
      EXPECT_EQ(check, "refusal") << r.outcome.reason;
    }
  }
  EXPECT_EQ(bad, 1u);
}

// The gate adds the refusal check to templates that list other checks, so a refusal in them is
// still judged once.
TEST(FaultContainment, TheGateJudgesARefusalInATemplateThatListsOtherChecks) {
  GateOptions o;
  o.profile = Profile::load("cpu");
  o.profile.kernels = {"fake.*"};
  o.profile.required.clear();
  o.cases = CaseFile::parse("kernel=fake.refuses_causal_cross recipe=bf16 problem=b1h2s40t72d32:mask=causal_br "
                            "dist=normal seed=1 check=accuracy,layout\n",
                            "t");
  const auto rep = run_gate(o);
  std::map<std::string, Verdict> v;
  for (const auto& r : rep.results) v[r.check] = r.outcome.verdict;
  ASSERT_EQ(v.size(), 3u);
  EXPECT_EQ(v.at("refusal"), Verdict::failed);
  EXPECT_EQ(v.at("accuracy"), Verdict::unsupported);
  EXPECT_EQ(v.at("layout"), Verdict::unsupported);
}

TEST(Declarations, FtzDeclaredPassesWithTheDeclarationUndeclaredFails) {
  const auto d = run_all("fake.flushes_declared", "b1h2s40t72d32", "subnormal").at("subnormal");
  EXPECT_EQ(d.outcome.verdict, Verdict::passed) << d.outcome.reason;
  EXPECT_EQ(d.outcome.reason.rfind("ftz declared: ", 0), 0u) << d.outcome.reason;
  EXPECT_NE(d.outcome.reason.find(" subnormal-range outputs flushed"), std::string::npos) << d.outcome.reason;
  EXPECT_EQ(d.outcome.figures.value("declared", ""), "ftz");
  const auto u = run_all("fake.flushes", "b1h2s40t72d32", "subnormal").at("subnormal");
  EXPECT_EQ(u.outcome.verdict, Verdict::failed);
  EXPECT_NE(u.outcome.reason.find("flushed"), std::string::npos) << u.outcome.reason;
}

TEST(Declarations, RowAlignSkipsUnalignedVariantsAndRefusesUnalignedProblems) {
  // An honest kernel that throws on any unaligned call: every check passes (none hands it one).
  for (const auto& [check, r] : run_all("fake.aligned8", "b1h2s40t72d32")) {
    EXPECT_TRUE(verdict_ok(r.outcome.verdict)) << check << ": " << r.outcome.reason;
    if (check == "layout") {
      EXPECT_EQ(r.outcome.verdict, Verdict::passed);
      const std::string skipped = r.outcome.figures["skipped"].dump();
      EXPECT_NE(skipped.find("outside the declaration (row_align = 8)"), std::string::npos) << skipped;
    }
    if (check == "refusal") {
      EXPECT_NE(r.outcome.figures.dump().find("rows not aligned to row_align 8"), std::string::npos);
    }
  }
  // Row stride 48 + 5 = 53 and head dim 20: outside the declaration, UNSUPPORTED (not failed).
  for (const char* p : {"b1h2s48d48v32:layout=strided:pad=5", "b1h2s24d20"})
    for (const auto& [check, r] : run_all("fake.aligned8", p)) {
      if (check == "refusal") continue;
      EXPECT_EQ(r.outcome.verdict, Verdict::unsupported) << p << " " << check << ": " << r.outcome.reason;
      EXPECT_NE(r.outcome.reason.find("is not a multiple of the declared row_align 8"), std::string::npos) << r.outcome.reason;
    }
}

TEST(Declarations, NoCausalCrossMakesCausalCrossCasesUnsupported) {
  for (const auto& [check, r] : run_all("fake.no_causal_cross", "b1h2s40t72d32:mask=causal_tl")) {
    if (check == "refusal") {
      EXPECT_EQ(r.outcome.verdict, Verdict::passed) << r.outcome.reason;
      continue;
    }
    EXPECT_EQ(r.outcome.verdict, Verdict::unsupported) << check;
    EXPECT_EQ(r.outcome.reason, "causal mask with S != T is outside the declaration (causal_cross = false)");
  }
  const auto r = run_all("fake.no_causal_cross", "b1h2s40d32:mask=causal_tl");
  EXPECT_EQ(r.at("accuracy").outcome.verdict, Verdict::passed);
  EXPECT_EQ(r.at("refusal").outcome.verdict, Verdict::passed);
  EXPECT_NE(r.at("refusal").outcome.figures.dump().find("causal with S != T"), std::string::npos);
}

TEST(Declarations, TheReportsShowEveryDeclaration) {
  GateOptions o;
  o.profile = Profile::load("cpu");
  o.profile.kernels = {"fake.*"};
  o.profile.required.clear();
  o.cases = CaseFile::parse("kernel=fake.flushes_declared recipe=bf16 problem=b1h2s40d32 dist=normal seed=1 "
                            "check=subnormal\n"
                            "kernel=fake.aligned8 recipe=bf16 problem=b1h2s40d32 dist=normal seed=1 check=accuracy\n"
                            "kernel=fake.no_causal_cross recipe=bf16 problem=b1h2s40d32 dist=normal seed=1 "
                            "check=accuracy\n",
                            "t");
  const auto rep = run_gate(o);
  const auto md = markdown_report(rep), table = summary_table(rep);
  const auto j = json_report(rep);
  for (const std::string& s : {md, table}) {
    EXPECT_NE(s.find("ftz, bitwise"), std::string::npos) << s;
    EXPECT_NE(s.find("row_align=8"), std::string::npos) << s;
    EXPECT_NE(s.find("causal_cross=false"), std::string::npos) << s;
  }
  EXPECT_EQ(j["meta"]["declarations"]["fake.flushes_declared"][0], "ftz");
  bool seen = false;
  for (const auto& c : j["coverage"])
    if (c["kernel"] == "fake.aligned8") seen = seen || c["declares"].dump().find("row_align=8") != std::string::npos;
  EXPECT_TRUE(seen) << j["coverage"].dump();
}

// Per-tensor layouts: an honest kernel that reads every tensor's strides passes all 19 variants
// (each of q, k, v, out alone through 4 kinds, 3 mixes), which the figures list with their strides.
TEST(Layouts, IndependentPerTensorVariantsOnAnHonestKernel) {
  const auto r = run_all("fake.refuses_causal_cross", "b2h2k1s20t33d16", "layout").at("layout");
  ASSERT_EQ(r.outcome.verdict, Verdict::passed) << r.outcome.reason;
  std::size_t per_tensor = 0;
  for (const auto& v : r.outcome.figures["variants"])
    if (v.contains("q")) {
      ++per_tensor;
      for (const char* t : {"q", "k", "v", "out"}) EXPECT_TRUE(v[t].contains("strides")) << v.dump();
    }
  EXPECT_EQ(per_tensor, 19u);
  EXPECT_NE(r.outcome.figures.dump().find("v: row_slice"), std::string::npos);
  EXPECT_NE(r.outcome.figures.dump().find("mix 3"), std::string::npos);
}

}  // namespace
}  // namespace attest::conformance
