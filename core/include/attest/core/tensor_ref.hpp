#pragma once
/// TensorRef: the one reference to somebody else's tensor memory, host or device -- {data, dtype,
/// logical 4-D shape, element strides, device}. A framework's tensor (torch data_ptr/stride), a
/// host Tensor or a device buffer is read in place through it, by host code and device code
/// alike: the element decoding, the per-element checksum and the error accumulation below are
/// written once and compiled for both (ATTEST_HD), so a figure means the same on either side.
///
/// Plain header, no device headers: .hip files and host C++ include it unchanged.
#include <cstdint>
#include <cstring>

#include "attest/core/dtype.hpp"
#include "attest/core/philox.hpp"  // ATTEST_HD

namespace attest {

struct TensorRef {
  const void* data = nullptr;
  DType dtype = DType::f32;  ///< f64, f32, bf16 or f16
  std::int64_t shape[4] = {1, 1, 1, 1};
  std::int64_t stride[4] = {0, 0, 0, 0};  ///< in elements
  bool device = false;

  ATTEST_HD std::int64_t numel() const { return shape[0] * shape[1] * shape[2] * shape[3]; }
  ATTEST_HD std::int64_t offset(std::int64_t i0, std::int64_t i1, std::int64_t i2, std::int64_t i3) const {
    return i0 * stride[0] + i1 * stride[1] + i2 * stride[2] + i3 * stride[3];
  }
};

namespace elem {

template <class To, class From>
ATTEST_HD inline To bits_as(From x) {  // memcpy: valid in host and device code, unlike a union
  To y;
  std::memcpy(&y, &x, sizeof(To));
  return y;
}

/// f16 bits widened to float exactly (no fp16 headers: they differ between CUDA and HIP).
ATTEST_HD inline float f16_to_float(std::uint16_t h) {
  const std::uint32_t sign = (h & 0x8000u) << 16, e = (h >> 10) & 0x1Fu, m = h & 0x3FFu;
  if (e == 0x1F) return bits_as<float>(sign | 0x7F800000u | (m << 13));
  if (e != 0) return bits_as<float>(sign | ((e + 112u) << 23) | (m << 13));
  const float x = static_cast<float>(m) * 5.9604644775390625e-8f;  // m * 2^-24, exact
  return sign != 0 ? -x : x;
}

/// Storage bytes of one element of a supported type (f64, f32, bf16, f16).
ATTEST_HD inline int bytes(DType t) { return t == DType::f64 ? 8 : t == DType::f32 ? 4 : 2; }

/// The value of an element from its storage bits, as double (every supported type widens exactly).
ATTEST_HD inline double from_bits(DType t, std::uint64_t b) {
  switch (t) {
    case DType::f64: return bits_as<double>(b);
    case DType::f32: return bits_as<float>(static_cast<std::uint32_t>(b));
    case DType::bf16: return bits_as<float>(static_cast<std::uint32_t>(b) << 16);
    case DType::f16: return f16_to_float(static_cast<std::uint16_t>(b));
    default: return 0.0;  // other types are refused by the engine (ref_of, checksum) and the device entry points
  }
}

/// The element's storage bits (zero-extended), for bitwise comparisons and checksums.
ATTEST_HD inline std::uint64_t bits(const TensorRef& t, std::int64_t off) {
  switch (t.dtype) {
    case DType::f64: return static_cast<const std::uint64_t*>(t.data)[off];
    case DType::f32: return static_cast<const std::uint32_t*>(t.data)[off];
    default: return static_cast<const std::uint16_t*>(t.data)[off];
  }
}

/// Element `off` (in elements) of `t` as double.
ATTEST_HD inline double load(const TensorRef& t, std::int64_t off) { return from_bits(t.dtype, bits(t, off)); }

/// One element pair of a bitwise comparison (a against b): whether a's value is NaN/Inf, whether
/// the pair differs (same types by their storage bits, different types by their float values)
/// and |a - b| of the float values in double (exact for two floats short of a huge exponent gap,
/// never overflowing), taken by its bits (NaN/Inf when either value is).
struct PairDiff {
  bool nonfinite_a, differs;
  double abs_diff;
};
ATTEST_HD inline PairDiff pair_diff(DType ta, std::uint64_t ba, DType tb, std::uint64_t bb) {
  const auto x = static_cast<float>(from_bits(ta, ba)), y = static_cast<float>(from_bits(tb, bb));
  PairDiff d;
  d.nonfinite_a = !(x - x == 0.0f);
  d.differs = ta == tb ? ba != bb : bits_as<std::uint32_t>(x) != bits_as<std::uint32_t>(y);
  d.abs_diff = bits_as<double>(bits_as<std::uint64_t>(static_cast<double>(x) - static_cast<double>(y)) & 0x7FFFFFFFFFFFFFFFull);
  return d;
}

/// One element's share of a checksum: its bits mixed with its logical index (splitmix64's
/// finaliser), summed modulo 2^64 -- order-free, so host and device and any thread count give
/// the same sum, and a change of any one element (or a swap of two) changes it.
ATTEST_HD inline std::uint64_t checksum_term(std::uint64_t bits, std::uint64_t index) {
  std::uint64_t z = bits + 0x9E3779B97F4A7C15ull * (index + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

ATTEST_HD inline bool finite(double x) { return x - x == 0.0; }

}  // namespace elem

/// Error figures of a test tensor against a reference over a set of elements (one 64-row block
/// of one head, or a whole tensor): the sums every metric of metrics::Comparison is made of.
/// Accumulated per element and merged in a fixed order, on the host or the device.
///
/// flush_below > 0 (a kernel that declares ftz, the subnormal check): the counters below are
/// taken on the values as given, then every |r| < flush_below and every |t| < flush_below
/// becomes a zero of its sign before the sums -- the reference flushed as the kernel flushes,
/// and the kernel's own subnormal-range outputs (flushed or kept: ftz allows either) out of the
/// error. flush_below = 0 leaves every figure as without it.
struct ErrSums {
  double max_abs = 0;    ///< max |t - r| over pairs finite in both
  double ref_max = 0;    ///< max |r| over finite r
  double sum_abs = 0;    ///< sum |t - r|
  double sum_sq = 0;     ///< sum (t - r)^2
  double ref_abs = 0;    ///< sum |r|
  double ref_sq = 0;     ///< sum r^2
  double test_sq = 0;    ///< sum t^2
  double dot = 0;        ///< sum t * r
  std::int64_t count = 0;
  std::int64_t nonfinite_test = 0;  ///< NaN/Inf in t where r is finite
  std::int64_t nonfinite_ref = 0;   ///< NaN/Inf in r
  std::int64_t nonzero_ref = 0;     ///< r finite and != 0 (before any flush)
  std::int64_t zero_test = 0;       ///< t == 0 where r is finite and != 0: outputs flushed (or rounded) to zero
  /// flush_below > 0 only: t == 0 where |r| >= 2 * flush_below (r is FP64: a correctly rounded
  /// output near flush_below may fall either side of it, never from 2 * flush_below to zero).
  std::int64_t flushed_normal = 0;
  /// max |r| over finite r != 0 where t == 0 (before any flush): the largest FP64 value a zero
  /// output stands for (with ftz declared, the engine compares it with what flushing can remove).
  double zero_ref_max = 0;

  /// zero_below (>= flush_below, with flush_below > 0): a zero t whose |r| is below it counts as
  /// flushed too (r zeroed with it): a kernel that flushes inputs, products and partial sums can
  /// zero outputs up to that size (the engine's 2 (T + 1) flush_below).
  ATTEST_HD void add(double t, double r, double flush_below = 0, double zero_below = 0) {
    ++count;
    if (!elem::finite(r)) {
      ++nonfinite_ref;
      return;
    }
    const double ar0 = r < 0 ? -r : r;
    if (r != 0) {
      ++nonzero_ref;
      zero_test += t == 0 ? 1 : 0;
      zero_ref_max = t == 0 && ar0 > zero_ref_max ? ar0 : zero_ref_max;
    }
    if (flush_below > 0) {
      flushed_normal += t == 0 && ar0 >= 2 * flush_below ? 1 : 0;
      constexpr std::uint64_t kSign = 0x8000000000000000ull;  // copysign(0, x), in host and device code
      if (ar0 < flush_below || (t == 0 && ar0 < zero_below)) r = elem::bits_as<double>(elem::bits_as<std::uint64_t>(r) & kSign);
      if ((t < 0 ? -t : t) < flush_below) t = elem::bits_as<double>(elem::bits_as<std::uint64_t>(t) & kSign);
    }
    if (!elem::finite(t)) {
      ++nonfinite_test;
      return;
    }
    const double d = t - r, ad = d < 0 ? -d : d, ar = r < 0 ? -r : r;
    max_abs = ad > max_abs ? ad : max_abs;
    ref_max = ar > ref_max ? ar : ref_max;
    sum_abs += ad;
    sum_sq += d * d;
    ref_abs += ar;
    ref_sq += r * r;
    test_sq += t * t;
    dot += t * r;
  }
  ATTEST_HD void merge(const ErrSums& o) {
    max_abs = o.max_abs > max_abs ? o.max_abs : max_abs;
    ref_max = o.ref_max > ref_max ? o.ref_max : ref_max;
    sum_abs += o.sum_abs;
    sum_sq += o.sum_sq;
    ref_abs += o.ref_abs;
    ref_sq += o.ref_sq;
    test_sq += o.test_sq;
    dot += o.dot;
    count += o.count;
    nonfinite_test += o.nonfinite_test;
    nonfinite_ref += o.nonfinite_ref;
    nonzero_ref += o.nonzero_ref;
    zero_test += o.zero_test;
    flushed_normal += o.flushed_normal;
    zero_ref_max = o.zero_ref_max > zero_ref_max ? o.zero_ref_max : zero_ref_max;
  }
};

}  // namespace attest
