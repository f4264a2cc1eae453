#pragma once
/// Scalar arithmetic of gpu.ref64's tensor-core path, host and device (ATTEST_HD), so the CPU
/// build tests it (kernels/gpu/tests/test_ref64_math.cpp) against long double: the softmax's
/// exponential. The FP64 pipe that runs the kernel's MMAs also runs every softmax instruction,
/// so each instruction saved there is MMA time.
#include <bit>
#include <cmath>
#include <cstdint>

#include "attest/core/philox.hpp"  // ATTEST_HD

namespace attest::gpu::ref64 {

/// 2^(j/64), j = 0..63, correctly rounded (written out: the bits depend on no library; made with
/// Python's decimal at 60 digits, checked against Boost.Multiprecision in the test).
inline constexpr int kExpTable = 64;
inline constexpr double kExpTab[kExpTable] = {
    0x1.0000000000000p+0, 0x1.02c9a3e778061p+0, 0x1.059b0d3158574p+0,
    0x1.0874518759bc8p+0, 0x1.0b5586cf9890fp+0, 0x1.0e3ec32d3d1a2p+0,
    0x1.11301d0125b51p+0, 0x1.1429aaea92de0p+0, 0x1.172b83c7d517bp+0,
    0x1.1a35beb6fcb75p+0, 0x1.1d4873168b9aap+0, 0x1.2063b88628cd6p+0,
    0x1.2387a6e756238p+0, 0x1.26b4565e27cddp+0, 0x1.29e9df51fdee1p+0,
    0x1.2d285a6e4030bp+0, 0x1.306fe0a31b715p+0, 0x1.33c08b26416ffp+0,
    0x1.371a7373aa9cbp+0, 0x1.3a7db34e59ff7p+0, 0x1.3dea64c123422p+0,
    0x1.4160a21f72e2ap+0, 0x1.44e086061892dp+0, 0x1.486a2b5c13cd0p+0,
    0x1.4bfdad5362a27p+0, 0x1.4f9b2769d2ca7p+0, 0x1.5342b569d4f82p+0,
    0x1.56f4736b527dap+0, 0x1.5ab07dd485429p+0, 0x1.5e76f15ad2148p+0,
    0x1.6247eb03a5585p+0, 0x1.6623882552225p+0, 0x1.6a09e667f3bcdp+0,
    0x1.6dfb23c651a2fp+0, 0x1.71f75e8ec5f74p+0, 0x1.75feb564267c9p+0,
    0x1.7a11473eb0187p+0, 0x1.7e2f336cf4e62p+0, 0x1.82589994cce13p+0,
    0x1.868d99b4492edp+0, 0x1.8ace5422aa0dbp+0, 0x1.8f1ae99157736p+0,
    0x1.93737b0cdc5e5p+0, 0x1.97d829fde4e50p+0, 0x1.9c49182a3f090p+0,
    0x1.a0c667b5de565p+0, 0x1.a5503b23e255dp+0, 0x1.a9e6b5579fdbfp+0,
    0x1.ae89f995ad3adp+0, 0x1.b33a2b84f15fbp+0, 0x1.b7f76f2fb5e47p+0,
    0x1.bcc1e904bc1d2p+0, 0x1.c199bdd85529cp+0, 0x1.c67f12e57d14bp+0,
    0x1.cb720dcef9069p+0, 0x1.d072d4a07897cp+0, 0x1.d5818dcfba487p+0,
    0x1.da9e603db3285p+0, 0x1.dfc97337b9b5fp+0, 0x1.e502ee78b3ff6p+0,
    0x1.ea4afa2a490dap+0, 0x1.efa1bee615a27p+0, 0x1.f50765b6e4540p+0,
    0x1.fa7c1819e90d8p+0};

/// e^x for x <= 0 (or NaN), within 3 ulp, branch-free, in 10 FP64 instructions where the
/// library's exp takes 15 and branches (so the eight calls of an MMA tile interleave):
/// x = k ln2/64 + r with |r| <= ln2/128 (Cody-Waite: ln2/64 in two parts, r exact to about
/// 2^-60); e^(k ln2/64) = 2^(k >> 6) tab[k & 63], the power of two added to the table value's
/// exponent field (an integer add on a normal number); e^r by its Taylor polynomial of degree 5
/// (truncation < 3.5e-17 relative). Results under e^-707 (x <= -707, -inf) are 0: in the
/// softmax such a P or rescale factor weighs < 1e-307 against a row sum >= 1 (the row
/// maximum's own P is 1). NaN stays NaN through the polynomial. `tab` is kExpTab or a copy.
ATTEST_HD inline double exp_nonpos(double x, const double* tab) {
  const double t = std::fma(x, 0x1.71547652b82fep+6, 0x1.8p52);  // round(64 x / ln2) in the low word
  const double kf = t - 0x1.8p52;
  double r = std::fma(kf, -0x1.62e42fefa39efp-7, x);  // x - k ln2/64: high part exact in the fma
  r = std::fma(kf, -0x1.abc9e3b39803fp-62, r);        // low part of ln2/64
  const auto k = static_cast<std::int32_t>(static_cast<std::uint32_t>(std::bit_cast<std::uint64_t>(t)));
  double q = std::fma(0x1.1111111111111p-7, r, 0x1.5555555555555p-5);  // 1/120, 1/24
  q = std::fma(q, r, 0x1.5555555555555p-3);                             // 1/6
  q = std::fma(q, r, 0.5);
  q = std::fma(q, r, 1.0);
  // x > -707: k >> 6 >= -1021, so the scaled table value (in [1, 2) before) stays normal.
  const std::uint64_t tk = std::bit_cast<std::uint64_t>(tab[k & (kExpTable - 1)]);
  const double sk = std::bit_cast<double>(tk + (static_cast<std::uint64_t>(static_cast<std::int64_t>(k >> 6)) << 52));
  const double y = sk * std::fma(q, r, 1.0);
  // -707 >= x >= -inf as 64-bit patterns (NaN patterns lie above -inf's): an integer compare.
  const auto u = std::bit_cast<std::uint64_t>(x);
  return u >= 0xC086180000000000ull && u <= 0xFFF0000000000000ull ? 0.0 : y;
}

}  // namespace attest::gpu::ref64
