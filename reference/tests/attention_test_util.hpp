#pragma once
// Helpers for the reference-attention tests: seeded fills (std::mt19937_64, independent of the
// datasets library), comparisons, and an independent long-double attention that builds its mask
// matrix from the mask definitions instead of Problem::visible_keys.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <random>
#include <vector>

#include "attest/core/problem.hpp"
#include "attest/core/tensor.hpp"

namespace attest::ref::test {

/// The problem of dimensions that tests compute (loops over sizes and masks); where they are fixed,
/// the tests parse the string form instead (`b2h4k1s100t333d16v24:mask=causal_br:dtype=f64`).
inline Problem make_problem(std::int64_t b, std::int64_t h, std::int64_t hk, std::int64_t s, std::int64_t t,
                            std::int64_t d, std::int64_t dv, Mask mask = Mask::none,
                            std::optional<double> scale = std::nullopt, DType dtype = DType::f64) {
  Problem p;
  p.batch = b;
  p.heads_q = h;
  p.heads_kv = hk;
  p.seqlen_q = s;
  p.seqlen_kv = t;
  p.head_dim = d;
  p.head_dim_v = dv;
  p.mask = mask;
  p.softmax_scale = scale;
  p.dtype = dtype;
  return p;
}

/// Contiguous f64 or f32 tensor of draws of `dist` from std::mt19937_64(seed), in element order
/// (each rounded to the dtype).
template <class Dist>
inline Tensor filled(const Shape& shape, std::uint64_t seed, DType dtype, Dist dist) {
  Tensor t(dtype, shape);
  std::mt19937_64 gen(seed);
  const auto n = t.numel();
  for (std::int64_t i = 0; i < n; ++i) {
    const auto x = dist(gen);
    if (dtype == DType::f64) t.data<double>()[i] = x;
    else t.data<float>()[i] = static_cast<float>(x);
  }
  return t;
}

/// Contiguous tensor of N(0, sd^2) values (rounded to the dtype).
inline Tensor normal(const Shape& shape, std::uint64_t seed, DType dtype = DType::f64, double sd = 1.0) {
  return filled(shape, seed, dtype, std::normal_distribution<double>(0.0, sd));
}

/// Contiguous tensor of uniform integers in [lo, hi].
inline Tensor integers(const Shape& shape, std::uint64_t seed, int lo, int hi, DType dtype = DType::f64) {
  return filled(shape, seed, dtype, std::uniform_int_distribution<int>(lo, hi));
}

/// Element of a rank-4 tensor (f32/f64) as double.
inline double at(const Tensor& t, std::int64_t a, std::int64_t b, std::int64_t c, std::int64_t d) {
  return t.get({a, b, c, d});
}
inline double at(const Tensor& t, std::int64_t a, std::int64_t b, std::int64_t c) { return t.get({a, b, c}); }

/// Writes x at a rank-4 index of a contiguous or strided f64/f32 tensor.
inline void set(const Tensor& t, std::int64_t a, std::int64_t b, std::int64_t c, std::int64_t d, double x) {
  const auto& st = t.strides();
  const std::int64_t off = a * st[0] + b * st[1] + c * st[2] + d * st[3];
  if (t.dtype() == DType::f64) t.data<double>()[off] = x;
  else t.data<float>()[off] = static_cast<float>(x);
}

/// Every element of a tensor, in logical row-major order, as double.
inline std::vector<double> values(const Tensor& t) {
  const Tensor c = t.contiguous();
  std::vector<double> v(static_cast<std::size_t>(c.numel()));
  for (std::size_t i = 0; i < v.size(); ++i)
    v[i] = c.dtype() == DType::f64 ? c.data<double>()[i] : static_cast<double>(c.data<float>()[i]);
  return v;
}

/// Same shape, dtype and bits (NaN payloads included).
inline bool bitwise_equal(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape() || a.dtype() != b.dtype()) return false;
  const Tensor ca = a.contiguous(), cb = b.contiguous();
  return std::memcmp(ca.raw(), cb.raw(), static_cast<std::size_t>(ca.numel()) * dtype_size(ca.dtype())) == 0;
}

/// ||a - b||_2 / ||b||_2 over finite data.
inline double rel_l2(const std::vector<double>& a, const std::vector<double>& b) {
  long double num = 0, den = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const long double d = static_cast<long double>(a[i]) - b[i];
    num += d * d;
    den += static_cast<long double>(b[i]) * b[i];
  }
  return static_cast<double>(std::sqrt(num / den));
}

inline double max_abs_diff(const std::vector<double>& a, const std::vector<double>& b) {
  double m = 0;
  for (std::size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(a[i] - b[i]));
  return m;
}

inline double max_abs(const std::vector<double>& a) {
  double m = 0;
  for (double x : a) m = std::max(m, std::abs(x));
  return m;
}

/// Probabilistic rounding bound for attention outputs on random normal inputs with unit roundoff
/// u (Higham & Mary 2019: a sum of n terms has relative error ~ sqrt(n) u, not n u):
///   logits: dot products of D terms, error ~ sqrt(D) u |s|, |s| = O(1) at scale 1/sqrt(D);
///           a logit error e moves the output by about e * |v - out|, i.e. ~ sqrt(D) u relative;
///   l and P.V: sums of T terms, ~ sqrt(T) u relative;  exp and the division: O(u).
/// So rel-L2 between an implementation and the exact result is ~ (sqrt(T) + sqrt(D)) u; the
/// constant 2 covers the difference of two such results. (Measured on the tests' fills: 0.1 to
/// 0.35 of this bound; a real defect such as a lost rescale or a wrong mask moves outputs by O(1).)
/// LSE errors are absolute: ~ (sqrt(T) + sqrt(D)) u plus u |lse| for the final m + log(l).
inline double rounding_bound(std::int64_t T, std::int64_t D, double u) {
  return 2.0 * (std::sqrt(static_cast<double>(T)) + std::sqrt(static_cast<double>(D))) * u;
}

/// Independent attention in long double for a non-ragged problem: the mask matrix is built from
/// the definitions (causal_tl: j <= i; causal_br: j <= i + T - S), masked logits are -inf, GQA is
/// an explicit head map. Returns out [B,S,H,Dv] and lse [B,H,S] flattened; fully-masked rows
/// give 0 and -inf.
struct HandResult {
  std::vector<double> out, lse;
};
inline HandResult hand_attention(const Problem& p, const Tensor& q, const Tensor& k, const Tensor& v) {
  const std::int64_t B = p.batch, S = p.seqlen_q, T = p.seqlen_kv, H = p.heads_q, D = p.head_dim, Dv = p.head_dim_v;
  const long double scale = p.scale();
  const long double ninf = -std::numeric_limits<long double>::infinity();
  HandResult r;
  r.out.assign(static_cast<std::size_t>(B * S * H * Dv), 0.0);
  r.lse.assign(static_cast<std::size_t>(B * H * S), 0.0);
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t h = 0; h < H; ++h) {
      const std::int64_t g = h * p.heads_kv / H;
      for (std::int64_t i = 0; i < S; ++i) {
        std::vector<long double> s(static_cast<std::size_t>(T), ninf);
        long double m = ninf;
        for (std::int64_t j = 0; j < T; ++j) {
          const bool visible = p.mask == Mask::none || (p.mask == Mask::causal_tl && j <= i) ||
                               (p.mask == Mask::causal_br && j <= i + T - S);
          if (!visible) continue;
          long double dot = 0;
          for (std::int64_t d = 0; d < D; ++d) dot += static_cast<long double>(at(q, b, i, h, d)) * at(k, b, j, g, d);
          s[static_cast<std::size_t>(j)] = scale * dot;
          m = std::max(m, s[static_cast<std::size_t>(j)]);
        }
        const auto li = static_cast<std::size_t>((b * H + h) * S + i);
        if (m == ninf) {
          r.lse[li] = -std::numeric_limits<double>::infinity();
          continue;
        }
        long double l = 0;
        std::vector<long double> o(static_cast<std::size_t>(Dv), 0);
        for (std::int64_t j = 0; j < T; ++j) {
          const long double pj = std::exp(s[static_cast<std::size_t>(j)] - m);
          l += pj;
          for (std::int64_t d = 0; d < Dv; ++d) o[static_cast<std::size_t>(d)] += pj * at(v, b, j, g, d);
        }
        for (std::int64_t d = 0; d < Dv; ++d)
          r.out[static_cast<std::size_t>(((b * S + i) * H + h) * Dv + d)] = static_cast<double>(o[static_cast<std::size_t>(d)] / l);
        r.lse[li] = static_cast<double>(m + std::log(l));
      }
    }
  return r;
}

}  // namespace attest::ref::test
