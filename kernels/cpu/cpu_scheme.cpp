#include "cpu/cpu_scheme.hpp"

namespace attest::kernels::cpu {

std::string unsupported_reason(const Scheme&) { return {}; }

}  // namespace attest::kernels::cpu
