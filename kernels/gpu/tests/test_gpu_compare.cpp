// Device comparisons of the conformance engine (compare.hpp) against an oracle written here in
// long double (block error sums), against the same sums on the host (checksums: the one code of
// core/tensor_ref.hpp, compiled for both), and against planted differences (bit counts).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "attest/kernels/gpu/compare.hpp"
#include "attest/kernels/gpu/device.hpp"
#include "gpu_test_util.hpp"

namespace attest::gpu {
namespace {

using i64 = std::int64_t;

std::uint16_t to_bf16(float x) {  // round to nearest even (finite inputs)
  std::uint32_t u;
  std::memcpy(&u, &x, 4);
  u += 0x7FFFu + ((u >> 16) & 1u);
  return static_cast<std::uint16_t>(u >> 16);
}

// A logical [B, S, H, D] bf16 tensor stored as [B, H, S, D] (a bhsd kernel's output seen bshd).
struct Strided {
  i64 B = 2, S = 100, H = 3, D = 64;
  std::vector<std::uint16_t> bits;
  std::vector<double> ref;  // contiguous [B, S, H, D]
  i64 off(i64 b, i64 s, i64 h, i64 d) const { return ((b * H + h) * S + s) * D + d; }
  TensorRef view(const void* p) const {
    TensorRef t;
    t.data = p;
    t.dtype = DType::bf16;
    const i64 shape[4] = {B, S, H, D}, stride[4] = {H * S * D, D, S * D, 1};
    for (int i = 0; i < 4; ++i) t.shape[i] = shape[i], t.stride[i] = stride[i];
    t.device = true;
    return t;
  }
};

Strided make(std::uint32_t seed) {
  Strided s;
  std::mt19937 rng(seed);
  std::normal_distribution<double> n(0, 1);
  s.bits.resize(static_cast<std::size_t>(s.B * s.S * s.H * s.D));
  s.ref.resize(s.bits.size());
  for (i64 b = 0; b < s.B; ++b)
    for (i64 i = 0; i < s.S; ++i)
      for (i64 h = 0; h < s.H; ++h)
        for (i64 d = 0; d < s.D; ++d) {
          const double r = n(rng) * (1 + h);
          s.ref[static_cast<std::size_t>(((b * s.S + i) * s.H + h) * s.D + d)] = r;
          s.bits[static_cast<std::size_t>(s.off(b, i, h, d))] = to_bf16(static_cast<float>(r));
        }
  return s;
}

double bf16_value(std::uint16_t h) {
  const std::uint32_t u = static_cast<std::uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Without and with a flush threshold (ErrSums::add's rule, written out again here): zeros
// planted at every fifth element are counted where the reference is not zero, and as
// flushed_normal where it is >= twice the threshold.
TEST(DeviceCompare, BlockErrorsMatchALongDoubleOracle) {
  ATTEST_REQUIRE_GPU();
  Strided s = make(7);
  for (std::size_t e = 0; e < s.bits.size(); e += 5) s.bits[e] = 0;
  s.bits[static_cast<std::size_t>(s.off(1, 70, 2, 5))] = 0x7FC0;  // one NaN in block (1, h2, rows 64-99)
  DeviceBuffer t(s.bits.size() * 2), r(s.ref.size() * 8);
  t.upload(s.bits.data(), s.bits.size() * 2);
  r.upload(s.ref.data(), s.ref.size() * 8);
  TensorRef rr;
  rr.data = r.data();
  rr.dtype = DType::f64;
  rr.device = true;
  const i64 shape[4] = {s.B, s.S, s.H, s.D}, stride[4] = {s.S * s.H * s.D, s.H * s.D, s.D, 1};
  for (int i = 0; i < 4; ++i) rr.shape[i] = shape[i], rr.stride[i] = stride[i];
  const i64 rows = 64, nblk = 2;
  for (const double flush : {0.0, 0.25}) {
    SCOPED_TRACE(testing::Message() << "flush_below " << flush);
    std::vector<ErrSums> got(static_cast<std::size_t>(s.B * s.H * nblk));
    block_errors_device(s.view(t.data()), rr, rows, got.data(), flush);
    i64 all_zero = 0, all_normal0 = 0;
    for (i64 b = 0; b < s.B; ++b)
      for (i64 h = 0; h < s.H; ++h)
        for (i64 blk = 0; blk < nblk; ++blk) {
          long double sq = 0, rsq = 0, mx = 0;
          i64 nan = 0, nonzero = 0, zero = 0, normal0 = 0;
          for (i64 i = blk * rows; i < std::min(s.S, blk * rows + rows); ++i)
            for (i64 d = 0; d < s.D; ++d) {
              long double x = bf16_value(s.bits[static_cast<std::size_t>(s.off(b, i, h, d))]);
              long double y = s.ref[static_cast<std::size_t>(((b * s.S + i) * s.H + h) * s.D + d)];
              if (y != 0) {
                ++nonzero;
                zero += x == 0;
              }
              if (flush > 0) {
                normal0 += x == 0 && std::fabs(y) >= 2 * flush;
                if (std::fabs(y) < flush) y = 0;
                if (std::fabs(x) < flush) x = 0;
              }
              if (std::isnan(static_cast<double>(x))) {
                ++nan;
                continue;
              }
              sq += (x - y) * (x - y);
              rsq += y * y;
              mx = std::max(mx, std::fabs(x - y));
            }
          all_zero += zero;
          all_normal0 += normal0;
          const ErrSums& e = got[static_cast<std::size_t>((b * s.H + h) * nblk + blk)];
          SCOPED_TRACE(testing::Message() << "b " << b << " h " << h << " block " << blk);
          EXPECT_EQ(e.count, (blk == 0 ? 64 : 36) * s.D);
          EXPECT_EQ(e.nonfinite_test, nan);
          EXPECT_EQ(e.nonzero_ref, nonzero);
          EXPECT_EQ(e.zero_test, zero);
          EXPECT_EQ(e.flushed_normal, normal0);
          EXPECT_EQ(e.max_abs, static_cast<double>(mx));  // a max of exact differences: exact
          EXPECT_NEAR(e.sum_sq, static_cast<double>(sq), 1e-12 * static_cast<double>(sq));
          EXPECT_NEAR(e.ref_sq, static_cast<double>(rsq), 1e-12 * static_cast<double>(rsq));
        }
    EXPECT_GT(all_zero, 0);
    EXPECT_EQ(all_normal0 > 0, flush > 0);
    EXPECT_EQ(got[static_cast<std::size_t>((1 * s.H + 2) * nblk + 1)].nonfinite_test, 1);
  }
}

// The tensor at element offset `shift` of a device buffer: shift 0 is 16-byte aligned (the
// kernels read 16-byte words), shift 1 is not (they read element by element). Both must agree.
struct Placed {
  DeviceBuffer buf;
  TensorRef view;
  Placed(const Strided& s, int shift) : buf((s.bits.size() + 8) * 2) {
    std::vector<std::uint16_t> host(s.bits.size() + 8, 0);
    std::copy(s.bits.begin(), s.bits.end(), host.begin() + shift);
    buf.upload(host.data(), host.size() * 2);
    view = s.view(static_cast<const std::uint16_t*>(buf.data()) + shift);
  }
};

TEST(DeviceCompare, ChecksumEqualsTheHostSumAndSeesOneFlippedBit) {
  ATTEST_REQUIRE_GPU();
  for (const int shift : {0, 1}) {
    SCOPED_TRACE(shift == 0 ? "16-byte words" : "element by element");
    Strided s = make(3);
    TensorRef hv = s.view(s.bits.data());
    hv.device = false;
    std::uint64_t host = 0;
    i64 e = 0;
    for (i64 b = 0; b < s.B; ++b)
      for (i64 i = 0; i < s.S; ++i)
        for (i64 h = 0; h < s.H; ++h)
          for (i64 d = 0; d < s.D; ++d, ++e)
            host += elem::checksum_term(elem::bits(hv, hv.offset(b, i, h, d)), static_cast<std::uint64_t>(e));
    EXPECT_EQ(checksum_device(Placed(s, shift).view), host);
    s.bits[static_cast<std::size_t>(s.off(0, 99, 1, 63))] ^= 1u;  // one mantissa bit
    const Placed flipped(s, shift);
    EXPECT_NE(checksum_device(flipped.view), host);
    // The call log's checksum (queued on a stream, read back later) is the same sum.
    Deferred log(2, nullptr);
    const int slot = log.checksum(flipped.view);
    log.collect();
    EXPECT_EQ(log.sum(slot), checksum_device(flipped.view));
  }
}

TEST(DeviceCompare, CompareCountsPlantedBitDifferences) {
  ATTEST_REQUIRE_GPU();
  for (const int shift : {0, 1}) {
    SCOPED_TRACE(shift == 0 ? "16-byte words" : "element by element");
    Strided s = make(5);
    const Placed a(s, shift);
    s.bits[static_cast<std::size_t>(s.off(1, 3, 0, 9))] ^= 1u;
    s.bits[static_cast<std::size_t>(s.off(0, 50, 2, 0))] ^= 1u;
    s.bits[static_cast<std::size_t>(s.off(1, 7, 1, 2))] = 0x7F80;  // +inf in b only
    const Placed b(s, shift);
    const auto f = compare_device(a.view, b.view);
    EXPECT_EQ(f.count, s.B * s.S * s.H * s.D);
    EXPECT_EQ(f.bit_diff, 3);
    EXPECT_EQ(f.first, ((0 * s.S + 50) * s.H + 2) * s.D + 0);  // logical (row-major bshd) index
    const auto g = compare_device(b.view, TensorRef{});  // the NaN/Inf scan alone
    EXPECT_EQ(g.nonfinite_a, 1);
    EXPECT_EQ(g.first, ((1 * s.S + 7) * s.H + 1) * s.D + 2);
  }
}

}  // namespace
}  // namespace attest::gpu
