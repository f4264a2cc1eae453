#include "attest/metrics/tensor_metrics.hpp"

#include <cmath>
#include <cstring>
#include <limits>

#include <nlohmann/json.hpp>

namespace attest::metrics {
namespace {

/// Walks a tensor's logical indices in row-major order; calls f(linear, index, byte pointer).
template <class F>
void for_each(const Tensor& t, F&& f) {
  const auto n = t.numel();
  Shape idx(static_cast<std::size_t>(t.rank()), 0);
  const auto es = static_cast<std::int64_t>(dtype_size(t.dtype()));
  for (std::int64_t i = 0; i < n; ++i) {
    std::int64_t off = 0;
    for (std::size_t d = 0; d < idx.size(); ++d) off += idx[d] * t.strides()[d];
    f(i, idx, t.raw() + off * es);
    for (std::size_t d = idx.size(); d-- > 0;) {
      if (++idx[d] < t.shape()[d]) break;
      idx[d] = 0;
    }
  }
}

double load(DType t, const std::byte* p) {
  if (t == DType::f64) {
    double v;
    std::memcpy(&v, p, 8);
    return v;
  }
  float v;
  std::memcpy(&v, p, 4);
  return v;
}

std::uint64_t bits(DType t, const std::byte* p) {
  std::uint64_t b = 0;
  std::memcpy(&b, p, dtype_size(t));
  return b;
}

void check_pair(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape())
    throw Error("compare: shape " + shape_string(a.shape()) + " differs from reference shape " + shape_string(b.shape()));
  for (const Tensor* t : {&a, &b})
    if (t->dtype() != DType::f32 && t->dtype() != DType::f64)
      throw Error("compare: dtype " + std::string(dtype_name(t->dtype())) + " is not f32 or f64");
}

double ratio(double num, double den) {
  if (den == 0) return num == 0 ? 0.0 : std::numeric_limits<double>::infinity();
  return num / den;
}

}  // namespace

Comparison compare(const Tensor& test, const Tensor& ref, std::size_t first_n) {
  check_pair(test, ref);
  Comparison c;
  c.count = test.numel();
  // Second operand walked in lockstep: both iterate the same logical order.
  std::vector<const std::byte*> rptr(static_cast<std::size_t>(c.count));
  for_each(ref, [&](std::int64_t i, const Shape&, const std::byte* p) { rptr[static_cast<std::size_t>(i)] = p; });
  const bool same_dtype = test.dtype() == ref.dtype();
  c.bit_mismatches = same_dtype ? 0 : -1;
  double sum_abs = 0, sum_ref_abs = 0, sum_sq = 0, sum_ref_sq = 0, sum_test_sq = 0, dot = 0;
  std::int64_t finite_pairs = 0;
  for_each(test, [&](std::int64_t i, const Shape& idx, const std::byte* p) {
    const std::byte* q = rptr[static_cast<std::size_t>(i)];
    const double t = load(test.dtype(), p), r = load(ref.dtype(), q);
    c.nan_test += std::isnan(t);
    c.inf_test += std::isinf(t);
    c.nan_ref += std::isnan(r);
    c.inf_ref += std::isinf(r);
    if (same_dtype && bits(test.dtype(), p) != bits(ref.dtype(), q)) {
      ++c.bit_mismatches;
      if (c.first_mismatches.size() < first_n)
        c.first_mismatches.push_back({idx, t, r, bits(test.dtype(), p), bits(ref.dtype(), q)});
    }
    if (!std::isfinite(t) || !std::isfinite(r)) {
      const bool same_class = (std::isnan(t) && std::isnan(r)) || (std::isinf(t) && t == r);
      c.nonfinite_mismatches += !same_class;
      return;
    }
    const double d = std::abs(t - r);
    if (finite_pairs == 0 || d > c.max_abs) {
      c.max_abs = d;
      c.max_abs_index = idx;
    }
    ++finite_pairs;
    sum_abs += d;
    sum_ref_abs += std::abs(r);
    sum_sq += d * d;
    sum_ref_sq += r * r;
    sum_test_sq += t * t;
    dot += t * r;
  });
  c.mean_abs = finite_pairs ? sum_abs / static_cast<double>(finite_pairs) : 0.0;
  c.rel_l1 = ratio(sum_abs, sum_ref_abs);
  c.rel_l2 = ratio(std::sqrt(sum_sq), std::sqrt(sum_ref_sq));
  c.rmse = finite_pairs ? std::sqrt(sum_sq / static_cast<double>(finite_pairs)) : 0.0;
  c.norm_test = std::sqrt(sum_test_sq);
  c.norm_ref = std::sqrt(sum_ref_sq);
  if (c.norm_test == 0 && c.norm_ref == 0) c.cosine = 1;
  else if (c.norm_test == 0 || c.norm_ref == 0) c.cosine = 0;
  else c.cosine = dot / std::sqrt(sum_test_sq * sum_ref_sq);  // one rounding of the norms, not two
  return c;
}

std::int64_t bit_mismatch_count(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype()) throw Error("bit compare: dtypes differ");
  if (a.shape() != b.shape()) throw Error("bit compare: shapes " + shape_string(a.shape()) + " and " + shape_string(b.shape()) + " differ");
  std::vector<std::uint64_t> bb(static_cast<std::size_t>(b.numel()));
  for_each(b, [&](std::int64_t i, const Shape&, const std::byte* p) { bb[static_cast<std::size_t>(i)] = bits(b.dtype(), p); });
  std::int64_t n = 0;
  for_each(a, [&](std::int64_t i, const Shape&, const std::byte* p) { n += bits(a.dtype(), p) != bb[static_cast<std::size_t>(i)]; });
  return n;
}

std::string index_string(const Shape& index) { return shape_string(index); }

void to_json(nlohmann::json& j, const Comparison& c) {
  // JSON has no Inf/NaN: non-finite figures are written as strings.
  auto num = [](double v) -> nlohmann::json {
    if (std::isnan(v)) return "nan";
    if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
    return v;
  };
  j = nlohmann::json{{"count", c.count}, {"max_abs", num(c.max_abs)}, {"max_abs_index", c.max_abs_index},
                     {"mean_abs", num(c.mean_abs)}, {"rel_l1", num(c.rel_l1)}, {"rel_l2", num(c.rel_l2)},
                     {"rmse", num(c.rmse)}, {"cosine", num(c.cosine)}, {"norm_test", num(c.norm_test)},
                     {"norm_ref", num(c.norm_ref)}, {"nan_test", c.nan_test}, {"inf_test", c.inf_test},
                     {"nan_ref", c.nan_ref}, {"inf_ref", c.inf_ref}, {"nonfinite_mismatches", c.nonfinite_mismatches},
                     {"bit_mismatches", c.bit_mismatches}};
  auto& mm = j["first_mismatches"] = nlohmann::json::array();
  for (const auto& m : c.first_mismatches)
    mm.push_back({{"index", m.index}, {"test", num(m.test)}, {"ref", num(m.ref)}, {"test_bits", m.test_bits}, {"ref_bits", m.ref_bits}});
}

}  // namespace attest::metrics
