#pragma once
/// Tensor comparison metrics: the figures every verdict quotes. All sums in double over float32 or
/// float64 tensors of the same logical shape (any strides).
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "attest/core/tensor.hpp"

namespace attest::metrics {

/// One element that differs bitwise, with its logical multi-index.
struct Mismatch {
  Shape index;
  double test = 0, ref = 0;
  std::uint64_t test_bits = 0, ref_bits = 0;
};

struct Comparison {
  std::int64_t count = 0;
  double max_abs = 0;     ///< max |t - r| over elements where both are finite
  Shape max_abs_index;    ///< where max_abs occurs
  double mean_abs = 0;    ///< mean |t - r| over finite pairs
  double rel_l1 = 0;      ///< sum |t - r| / sum |r|   (0/0 = 0, x/0 = inf)
  double rel_l2 = 0;      ///< ||t - r||_2 / ||r||_2   (same convention)
  double rmse = 0;        ///< sqrt(mean (t - r)^2)
  double cosine = 1;      ///< <t, r> / (|t| |r|); 1 when both are zero, 0 when exactly one is
  double norm_test = 0, norm_ref = 0;  ///< L2 norms (trust checks: a zero output detects nothing)
  std::int64_t nan_test = 0, inf_test = 0, nan_ref = 0, inf_ref = 0;
  /// Non-finite class mismatches: NaN vs not NaN, or +-Inf vs a different value.
  std::int64_t nonfinite_mismatches = 0;
  /// Elements whose bit patterns differ (only when dtypes match; else -1).
  std::int64_t bit_mismatches = -1;
  std::vector<Mismatch> first_mismatches;  ///< the first N bitwise mismatches in logical order
};

/// Compares `test` against `ref`. Shapes must match (attest::Error otherwise); dtypes f32/f64.
/// `first_n` bounds the recorded bitwise mismatches.
Comparison compare(const Tensor& test, const Tensor& ref, std::size_t first_n = 8);

/// Number of elements whose bits differ; both tensors must have the same dtype and shape.
std::int64_t bit_mismatch_count(const Tensor& a, const Tensor& b);

void to_json(nlohmann::json& j, const Comparison& c);
/// "[1, 0, 3, 17]"
std::string index_string(const Shape& index);

}  // namespace attest::metrics
