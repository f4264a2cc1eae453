#pragma once
/// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11), the
/// counter-based generator behind every input fill: element i of tensor t under seed s is a pure
/// function of (s, t, i), so any element can be produced in any order, on the host or a device.
/// Header-only and constexpr so device code can include it unchanged.
#include <array>
#include <cstdint>

#if defined(__CUDACC__) || defined(__HIPCC__)
#define ATTEST_HD __host__ __device__
#else
#define ATTEST_HD
#endif

namespace attest {

struct Philox4x32 {
  using Counter = std::array<std::uint32_t, 4>;
  using Key = std::array<std::uint32_t, 2>;

  static constexpr std::uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  static constexpr std::uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;  // Weyl key increments

  /// The 10-round bijection of `ctr` under `key`.
  ATTEST_HD static constexpr Counter generate(Counter ctr, Key key) {
    for (int r = 0; r < 10; ++r) {
      if (r > 0) {
        key[0] += kW0;
        key[1] += kW1;
      }
      const std::uint64_t p0 = static_cast<std::uint64_t>(kM0) * ctr[0];
      const std::uint64_t p1 = static_cast<std::uint64_t>(kM1) * ctr[2];
      const auto hi0 = static_cast<std::uint32_t>(p0 >> 32), lo0 = static_cast<std::uint32_t>(p0);
      const auto hi1 = static_cast<std::uint32_t>(p1 >> 32), lo1 = static_cast<std::uint32_t>(p1);
      ctr = {hi1 ^ ctr[1] ^ key[0], lo1, hi0 ^ ctr[3] ^ key[1], lo0};
    }
    return ctr;
  }
};

/// Four 32-bit words for element `index` of tensor `tensor_id` under `seed`.
/// Key = seed (64 bits); counter = (index low, index high, tensor_id, 0).
ATTEST_HD constexpr Philox4x32::Counter philox_words(std::uint64_t seed, std::uint32_t tensor_id,
                                                     std::uint64_t index) {
  return Philox4x32::generate(
      {static_cast<std::uint32_t>(index), static_cast<std::uint32_t>(index >> 32), tensor_id, 0u},
      {static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32)});
}

}  // namespace attest
