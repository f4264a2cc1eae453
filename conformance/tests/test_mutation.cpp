// The mutation test and the false-alarm sweep, on the real registry (kern's cpu.* kernels and
// mutants): every mutant fails at least one check of the smoke set (the mutation score and the
// checks that caught each are printed); built as conformance_seeds (ATTEST_SEED_SWEEP, label
// slow) it is the false-alarm sweep instead: every correct cpu.* kernel passes the 50-seed set
// datasets/cases/seeds.cases. (Every cpu.* kernel passing every smoke case is conformance_smoke.)
#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <set>

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
TEST(Mutation, EveryMutantFailsAtLeastOneCheck) {
  std::map<std::string, std::set<std::string>> caught;
  std::set<std::string> mutants;
  for (const auto& k : kernels::Registry::instance().match("mutant.*")) mutants.insert(k->name());
  ASSERT_GE(mutants.size(), 15u) << "kern's 15 mutants are expected in test builds";
  for (const auto& r : gate("smoke", "mutant.*"))
    if (!verdict_ok(r.outcome.verdict)) caught[r.kernel].insert(r.check);
  std::size_t killed = 0;
  std::printf("mutant                          caught by\n");
  for (const auto& m : mutants) {
    std::string checks;
    for (const auto& c : caught[m]) checks += (checks.empty() ? "" : ", ") + c;
    std::printf("%-31s %s\n", m.c_str(), checks.empty() ? "(SURVIVED)" : checks.c_str());
    killed += !caught[m].empty();
    EXPECT_FALSE(caught[m].empty()) << m << " survived every smoke check";
  }
  std::printf("mutation score: %zu/%zu\n", killed, mutants.size());
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
