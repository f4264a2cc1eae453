// The abstract gate suite over the kernel registry (cpu profile) x the smoke case set.
#include "conformance_suite.hpp"

namespace attest::conformance {
INSTANTIATE_TEST_SUITE_P(Smoke, GateGroup, ::testing::ValuesIn(gate_groups("smoke", "cpu")), group_name);
}  // namespace attest::conformance
