#pragma once
// The abstract GoogleTest suite of the gate: one test per (kernel, recipe, problem, dist, seed)
// group running every check of the group. A test program instantiates it over the registry and
// a case file:
//   INSTANTIATE_TEST_SUITE_P(Smoke, GateGroup, ::testing::ValuesIn(attest::conformance::gate_groups("smoke", "cpu")),
//                            attest::conformance::group_name);
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "attest/conformance/case.hpp"

namespace attest::conformance {

/// The cases of one group (same inputs), checks innermost.
struct Group {
  std::vector<Case> cases;
};
void PrintTo(const Group& g, std::ostream* os);

/// Expands a case set (or file) for a profile against the registry into groups.
std::vector<Group> gate_groups(const std::string& cases, const std::string& profile, const std::string& kernel_glob = "");
/// "cpu_tiled_bf16__bf16__b1h2s64d64__normal__s1": readable, only [A-Za-z0-9_].
std::string group_name(const ::testing::TestParamInfo<Group>& info);

class GateGroup : public ::testing::TestWithParam<Group> {};

}  // namespace attest::conformance
