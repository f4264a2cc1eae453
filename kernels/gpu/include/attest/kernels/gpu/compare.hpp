#pragma once
/// Device-side comparisons of caller tensors for the conformance engine
/// (conformance/include/attest/conformance/engine.hpp): a framework's device memory, any
/// strides, read in place through attest::TensorRef; only figures, or the few rows a sampled
/// check needs, come back to the host. The element decoding and the error sums are core's
/// (attest/core/tensor_ref.hpp), the same code the engine's host path runs. Plain C++ header.
#include <cstdint>

#include "attest/core/tensor_ref.hpp"

namespace attest::gpu {

/// Figures of one device comparison. Elements are visited in logical (row-major) order;
/// `first` is the smallest logical index that differs (-1: none).
struct CmpFigures {
  std::int64_t count = 0;        ///< elements compared
  std::int64_t bit_diff = 0;     ///< elements whose bits differ (b absent: 0)
  std::int64_t nonfinite_a = 0;  ///< NaN or Inf elements of a
  std::int64_t first = -1;       ///< first differing logical index (b absent: first non-finite of a)
  double max_abs = 0;            ///< max |a - b| over finite pairs (b absent: 0)
};

/// Compares a with b (same logical shape; b.data == nullptr: scans a alone for NaN/Inf).
/// f32 / bf16 / f16. Synchronous; throws attest::Error on a shape mismatch or a runtime error.
CmpFigures compare_device(const TensorRef& a, const TensorRef& b);

/// Copies the logical sub-block [lo, hi) of `src` (per dimension) into host memory as
/// contiguous float32 (row-major over the sub-block). Synchronous.
void gather_f32(const TensorRef& src, const std::int64_t lo[4], const std::int64_t hi[4], float* host_out);

/// Sum over the elements of elem::checksum_term(bits, logical index), modulo 2^64: the input
/// guard's fingerprint (the engine's host path computes the same sum). Synchronous.
std::uint64_t checksum_device(const TensorRef& t);

/// Error sums of `test` against `ref` (same logical shape [n0, S, n2, D]; f64, f32, bf16 or f16)
/// per (i0, i2, block of `rows` consecutive i1): out[(i0 * n2 + i2) * nblk + blk], nblk =
/// ceil(S / rows), copied to host memory. Deterministic (fixed per-thread order, tree
/// reduction). Synchronous. `flush_below`, `zero_below`: ErrSums::add's (0: no flushing).
void block_errors_device(const TensorRef& test, const TensorRef& ref, std::int64_t rows, ErrSums* host_out,
                         double flush_below = 0, double zero_below = 0);

/// Deferred comparisons and checksums: launched on `stream` (the caller's, so that they run after
/// the kernel that wrote the tensors and before anything that reuses their memory) into slots of
/// one device buffer, read back together by collect() -- no host synchronisation per call.
class Deferred {
 public:
  Deferred(int slots, void* stream);
  ~Deferred();
  Deferred(const Deferred&) = delete;
  Deferred& operator=(const Deferred&) = delete;
  /// Slot of a bitwise comparison of b with a (same logical shape; f32 / bf16 / f16).
  int compare(const TensorRef& a, const TensorRef& b);
  /// Slot of a checksum of t.
  int checksum(const TensorRef& t);
  /// Waits for the launches and reads every slot back (one copy).
  void collect();
  [[nodiscard]] CmpFigures figures(int slot) const;
  [[nodiscard]] std::uint64_t sum(int slot) const;

 private:
  struct Impl;
  Impl* impl_;
};

}  // namespace attest::gpu
