#include "conformance_suite.hpp"

#include <map>

#include "attest/conformance/gate.hpp"

namespace attest::conformance {

void PrintTo(const Group& g, std::ostream* os) { *os << (g.cases.empty() ? "(empty)" : group_key(g.cases.front())); }

std::vector<Group> gate_groups(const std::string& cases, const std::string& profile, const std::string& kernel_glob) {
  const auto ex = expand(CaseFile::load(cases), Profile::load(profile), {kernel_glob, "", ""});
  std::vector<Group> groups;
  std::map<std::string, std::size_t> at;
  for (const auto& c : ex.cases) {
    auto [it, fresh] = at.emplace(group_key(c), groups.size());
    if (fresh) groups.emplace_back();
    groups[it->second].cases.push_back(c);
  }
  return groups;
}

std::string group_name(const ::testing::TestParamInfo<Group>& info) {
  const Case& c = info.param.cases.front();
  std::string s = c.kernel + "__" + recipe_label(c.recipe) + "__" + to_string(c.problem) + "__" +
                  std::string(datasets::distribution_name(c.dist)) + "__s" + std::to_string(c.seed);
  for (char& ch : s)
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '_') ch = '_';
  return s + "_" + std::to_string(info.index);
}

TEST_P(GateGroup, EveryCheckPasses) {
  const auto& g = GetParam();
  ASSERT_FALSE(g.cases.empty());
  const auto results = run_cases(g.cases, ToleranceTable::builtin(), {});
  for (const auto& r : results)
    EXPECT_TRUE(verdict_ok(r.outcome.verdict))
        << verdict_name(r.outcome.verdict) << " " << r.check << ": " << r.outcome.reason << "\n  attest run '"
        << r.descriptor << "'";
}

}  // namespace attest::conformance
