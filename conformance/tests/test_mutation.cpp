// The mutation tests and the false-alarm sweep, on the real registry (kern's cpu.* kernels and
// mutants): every mutant's bitwise registration fails at least one check of the smoke set, and
// every non-bitwise registration a check other than bitwise (the scores and the checks that
// caught each are printed as Markdown tables); built as conformance_seeds (ATTEST_SEED_SWEEP, label
// slow) it is the false-alarm sweep instead: every correct cpu.* kernel passes the 50-seed set
// datasets/cases/seeds.cases. (Every cpu.* kernel passing every smoke case is conformance_smoke.)
#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <set>

#include <fmt/format.h>

#include "attest/conformance/gate.hpp"
#include "attest/kernels/kernel.hpp"

namespace attest::conformance {
namespace {

std::vector<Result> gate(const char* set, const std::string& kernel_glob) {
  GateOptions o;
  o.profile = Profile::load("cpu");
  o.cases = CaseFile::load(set);
  o.selection.kernel = kernel_glob;
  o.jobs = 2;
  auto rep = run_gate(o);
  EXPECT_TRUE(rep.errors.empty()) << rep.errors.front();
  return rep.results;
}

#ifndef ATTEST_SEED_SWEEP
// What the gate found for each mutant of a registration: the checks that failed it, and for the
// survivors the worst accuracy margin (largest measured / bound over the cases and metrics).
struct Score {
  std::set<std::string> mutants;  ///< the mutant's name without "mutant." / "mutant.nb."
  std::map<std::string, std::set<std::string>> caught;
  std::map<std::string, std::string> closest;  ///< survivor -> "metric measured vs bound (case)"
};

// The CPU mutants' registrations whose names start with `prefix` ("mutant." or "mutant.nb."),
// through the gate on `set`; the `bitwise` check's verdict counts only when `count_bitwise`.
// fnmatch has no exclusion, so the bitwise registrations are the union of two globs that leave
// out "mutant.nb.*" (no mutant name starts with "nb").
Score score(const char* set, const std::string& prefix, bool count_bitwise) {
  const std::vector<std::string> globs = prefix == "mutant." ? std::vector<std::string>{"mutant.[!n]*", "mutant.n[!b]*"}
                                                             : std::vector<std::string>{prefix + "*"};
  Score s;
  std::map<std::string, double> worst;
  for (const auto& g : globs) {
    for (const auto& k : kernels::Registry::instance().match(g))
      if (k->backend() == "cpu") s.mutants.insert(k->name().substr(prefix.size()));  // GPU mutants: the sm90 gate
    for (const auto& r : gate(set, g)) {
      const std::string m = r.kernel.substr(prefix.size());
      if (!s.mutants.count(m)) continue;
      if (!verdict_ok(r.outcome.verdict) && (count_bitwise || r.check != "bitwise")) s.caught[m].insert(r.check);
      // Margins of the accuracy check (figures: judgement.metrics.<metric>.{measured,bound}).
      const auto& f = r.outcome.figures;
      if (r.check != "accuracy" || !f.contains("judgement") || !f["judgement"].contains("metrics")) continue;
      for (const auto& [metric, v] : f["judgement"]["metrics"].items()) {
        if (!v.contains("bound") || !v["bound"].is_number() || !v["measured"].is_number()) continue;
        const double bound = v["bound"].get<double>(), meas = v["measured"].get<double>();
        if (bound <= 0 || meas / bound <= worst[m]) continue;
        worst[m] = meas / bound;
        s.closest[m] = fmt::format("{} {:.4g} vs bound {:.4g} ({:.2f} x; {} {} {})", metric, meas, bound, meas / bound,
                                   r.recipe, r.problem, r.dist);
      }
    }
  }
  return s;
}

// Prints the table (mutant | caught by) as Markdown rows; returns the number caught.
std::size_t print_table(const Score& s, const char* title) {
  std::size_t killed = 0;
  std::printf("%s\n| mutant | caught by |\n|---|---|\n", title);
  for (const auto& m : s.mutants) {
    std::string checks;
    for (const auto& c : s.caught.count(m) ? s.caught.at(m) : std::set<std::string>{}) checks += (checks.empty() ? "" : ", ") + c;
    if (checks.empty()) checks = "(SURVIVED" + (s.closest.count(m) ? "; closest accuracy: " + s.closest.at(m) : "") + ")";
    else ++killed;
    std::printf("| %s | %s |\n", m.c_str(), checks.c_str());
  }
  std::printf("mutation score: %zu/%zu\n", killed, s.mutants.size());
  return killed;
}

// The bitwise registrations (mutant.<name>): each lies about a bitwise contract, so the bitwise
// check may catch it; every mutant must fail at least one check of the smoke set.
TEST(Mutation, EveryMutantFailsAtLeastOneCheck) {
  const Score s = score("smoke", "mutant.", true);
  ASSERT_GE(s.mutants.size(), 30u) << "the catalogue (kernels/cpu/mutants) has >= 30 CPU mutants in test builds";
  print_table(s, "bitwise registrations (mutant.<name>), smoke set, every check counts");
  for (const auto& m : s.mutants) EXPECT_TRUE(s.caught.count(m)) << "mutant." << m << " survived every smoke check";
}

// Mutants shown to be below the noise floor of every smoke case: no numerical check can tell
// them from a correct kernel of their recipe (docs/gate.md "Mutants" has the numbers). Each
// entry is asserted to survive, so a list entry that the checks start catching must be removed.
const std::map<std::string, std::string> kBelowNoiseFloor = {
};

// The non-bitwise registrations (mutant.nb.<name>, capabilities.bitwise = false, like every real
// kernel): only the numerical, determinism and memory checks can catch them. The score counts
// every check but `bitwise` (which reports them unsupported anyway).
TEST(Mutation, EveryNonBitwiseMutantFailsANumericalOrMemoryCheck) {
  const Score s = score("smoke", "mutant.nb.", false);
  ASSERT_GE(s.mutants.size(), 30u);
  const std::size_t killed = print_table(s, "non-bitwise registrations (mutant.nb.<name>), smoke set, checks other than bitwise");
  for (const auto& m : s.mutants) {
    const bool allowed = kBelowNoiseFloor.count(m) > 0;
    if (allowed) {
      EXPECT_FALSE(s.caught.count(m)) << "mutant.nb." << m << " is caught now: remove it from kBelowNoiseFloor";
    } else {
      EXPECT_TRUE(s.caught.count(m)) << "mutant.nb." << m << " survived every check but bitwise"
                                     << (s.closest.count(m) ? "; closest accuracy: " + s.closest.at(m) : "");
    }
  }
  for (const auto& [m, why] : kBelowNoiseFloor) EXPECT_TRUE(s.mutants.count(m)) << m << ": allow-listed but not registered";
  std::printf("non-bitwise score: %zu caught, %zu allow-listed below the noise floor, of %zu\n", killed,
              kBelowNoiseFloor.size(), s.mutants.size());
}

// A kernel that reads V as if it shared the problem's dense layout: the per-tensor layout
// variants catch it, and the reason names V's view first.
TEST(Mutation, IgnoringVStridesFailsLayoutNamingV) {
  for (const char* k : {"mutant.ignores_v_strides", "mutant.nb.ignores_v_strides"}) {
    const auto rs = run_cases({parse_case(std::string("kernel=") + k + " recipe=bf16 problem=b1h2s40t72d32 dist=normal seed=1")},
                              ToleranceTable::builtin(), {});
    for (const auto& r : rs) {
      if (r.check == "layout") {
        EXPECT_EQ(r.outcome.verdict, Verdict::failed) << k;
        EXPECT_EQ(r.outcome.reason.rfind("v: transposed view (strides [", 0), 0u) << k << ": " << r.outcome.reason;
      } else if (r.check != "call_path") {
        EXPECT_TRUE(verdict_ok(r.outcome.verdict)) << k << " " << r.check << ": " << r.outcome.reason;
      }
    }
  }
}
#endif

#ifdef ATTEST_SEED_SWEEP
TEST(FalseAlarms, FiftySeedsWithoutAFalseAlarm) {
  std::size_t n = 0, passed = 0;
  std::set<std::uint64_t> seeds;
  for (const auto& r : gate("seeds", "cpu.*")) {
    ++n;
    passed += r.outcome.verdict == Verdict::passed;
    seeds.insert(r.seed);
    EXPECT_TRUE(verdict_ok(r.outcome.verdict)) << verdict_name(r.outcome.verdict) << ": " << r.outcome.reason
                                               << "\n  attest run '" << r.descriptor << "'";
  }
  EXPECT_GE(seeds.size(), 50u);
  std::printf("seed sweep: %zu cases, %zu passed, 0 false alarms expected\n", n, passed);
}
#endif

}  // namespace
}  // namespace attest::conformance
