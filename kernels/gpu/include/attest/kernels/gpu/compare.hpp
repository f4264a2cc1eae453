#pragma once
/// Device-side comparison and gathering for the device-resident gate (python/csrc/attest_py_device.cpp):
/// a caller's tensors (a framework's device memory, any strides, f32 / bf16 / f16) are compared
/// or read where they live, and only figures, or the few rows a sampled check needs, come back
/// to the host. Plain C++ header (no device headers).
#include <cstdint>

namespace attest::gpu {

/// Element types of caller tensors.
enum class CmpType : std::uint8_t { f32, bf16, f16 };

/// A caller's 4-D device tensor: logical shape and element strides (any order in memory).
struct View4 {
  const void* data = nullptr;
  CmpType type = CmpType::f32;
  std::int64_t shape[4] = {1, 1, 1, 1};
  std::int64_t stride[4] = {0, 0, 0, 0};
};

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
/// Synchronous; throws attest::Error on a shape mismatch or a runtime error.
CmpFigures compare_device(const View4& a, const View4& b);

/// Copies the logical sub-block [lo, hi) of `src` (per dimension) into host memory as
/// contiguous float32 (row-major over the sub-block). Synchronous.
void gather_f32(const View4& src, const std::int64_t lo[4], const std::int64_t hi[4], float* host_out);

}  // namespace attest::gpu
