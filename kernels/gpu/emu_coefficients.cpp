// exp2=cr's polynomial coefficients for the gpu.emu kernels, computed exactly as the emulator
// computes its own (reference/src/exp2.cpp): ln2^k / k! in 166-bit arithmetic, rounded once to
// double. Host code; the values travel to the device in the kernel's parameters.
#include <boost/math/constants/constants.hpp>
#include <boost/multiprecision/cpp_bin_float.hpp>

#include <array>

#include "attest/kernels/gpu/attn_fwd_emu.hpp"

namespace attest::gpu {

const double* exp2_cr_coefficients() {
  static const std::array<double, 16> c = [] {
    using Mp = boost::multiprecision::cpp_bin_float_50;
    std::array<double, 16> r{};
    const Mp ln2 = boost::math::constants::ln_two<Mp>();
    Mp term = 1;
    for (int k = 0; k <= 15; ++k) {
      r[static_cast<std::size_t>(k)] = static_cast<double>(term);
      term = term * ln2 / (k + 1);
    }
    return r;
  }();
  return c.data();
}

}  // namespace attest::gpu
