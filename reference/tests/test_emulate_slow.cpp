// Dense sweep of the correctly rounded exp2 (label slow): every 64th float of [-150, 0], about
// 17.6 million inputs, against the quad / 332-bit oracle.
#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <cstdio>

#include "attest/reference/emulate.hpp"
#include "emulate_test_oracle.hpp"

namespace attest::ref {
namespace {

TEST(Exp2CrSlow, EveryStrideOf64FloatsInMinus150To0) {
  const std::uint32_t lo = 0x80000000u, hi = std::bit_cast<std::uint32_t>(-150.0f);
  const std::int64_t n = (hi - lo) / 64 + 1;
  std::int64_t mismatches = 0, undecided = 0;
#pragma omp parallel for reduction(+ : mismatches, undecided) schedule(dynamic, 65536)
  for (std::int64_t i = 0; i < n; ++i) {
    // Offset the stride by i % 64 so that every low-bit pattern of the significand occurs.
    const float x = std::bit_cast<float>(static_cast<std::uint32_t>(lo + static_cast<std::uint32_t>(i) * 64u +
                                                                    static_cast<std::uint32_t>(i % 64)));
    if (std::bit_cast<std::uint32_t>(exp2_cr(x)) != std::bit_cast<std::uint32_t>(test::exp2_oracle(x))) ++mismatches;
    if (!exp2_cr_fast_path_decides(x)) ++undecided;
  }
  std::printf("exp2_cr dense sweep: %lld inputs, %lld mismatches, %lld decided in 166-bit arithmetic\n",
              static_cast<long long>(n), static_cast<long long>(mismatches), static_cast<long long>(undecided));
  EXPECT_EQ(mismatches, 0);
}

}  // namespace
}  // namespace attest::ref
