#include "attest/datasets/distributions.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <string>
#include <utility>

#include "attest/core/philox.hpp"
#include "attest/core/status.hpp"
#include "attest/datasets/exact_math.hpp"
#include "attest/datasets/sample.hpp"

namespace attest::datasets {
namespace {

constexpr std::array<std::pair<Distribution, std::string_view>, 10> kNames{{
    {Distribution::normal, "normal"},
    {Distribution::uniform, "uniform"},
    {Distribution::exact_int, "exact_int"},
    {Distribution::diffusion, "diffusion"},
    {Distribution::sink, "sink"},
    {Distribution::latesink, "latesink"},
    {Distribution::maxstair, "maxstair"},
    {Distribution::underflow, "underflow"},
    {Distribution::outlier, "outlier"},
    {Distribution::constant, "constant"},
}};

constexpr std::array<Distribution, 10> kAll = [] {
  std::array<Distribution, 10> a{};
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = kNames[i].first;
  return a;
}();

}  // namespace

namespace detail {
double unit_open0(std::uint32_t w0, std::uint32_t w1) { return element::unit_open0(w0, w1); }
double box_muller(std::uint32_t w0, std::uint32_t w1, std::uint32_t w2) { return element::box_muller(w0, w1, w2); }
float uniform_pm1(std::uint32_t w) { return element::uniform_pm1(w); }
}  // namespace detail

std::string_view distribution_name(Distribution d) { return kNames[static_cast<std::size_t>(d)].second; }

Distribution parse_distribution(std::string_view name) {
  std::string valid;
  for (const auto& [d, n] : kNames) {
    if (n == name) return d;
    valid += (valid.empty() ? "" : ", ") + std::string(n);
  }
  throw Error("unknown distribution '" + std::string(name) + "' (valid: " + valid + ")");
}

std::span<const Distribution> all_distributions() { return kAll; }

float sample(Distribution dist, Role r, std::uint64_t seed, const Problem& p, std::int64_t b, std::int64_t s,
             std::int64_t h, std::int64_t d) {
  if (static_cast<std::size_t>(dist) >= kNames.size())
    throw Error("sample: invalid distribution value " + std::to_string(static_cast<int>(dist)));
  // The element function lives in sample.hpp (host/device), so a device port runs the same code.
  return sample_element(dist, r, seed, sample_shape(p), p.len_kv(b), b, s, h, d);
}

namespace {
Tensor generate_one(const Problem& p, Distribution dist, std::uint64_t seed, Role r) {
  const element::Dims dm = element::dims_of(r, sample_shape(p));
  const auto& cu = r == Role::q ? p.cu_seqlens_q : p.cu_seqlens_kv;
  const std::int64_t rows = p.ragged() ? cu.back() : p.batch * dm.smax;
  Tensor t(DType::f32, p.ragged() ? Shape{1, rows, dm.heads, dm.dim} : Shape{p.batch, dm.smax, dm.heads, dm.dim});
  float* out = t.data<float>();
  const std::int64_t row_elems = dm.heads * dm.dim;
  // Rows are independent and every element is a pure function of its index, so the schedule
  // cannot change a single bit.
#pragma omp parallel for schedule(static) if (rows * row_elems > (1 << 15))
  for (std::int64_t row = 0; row < rows; ++row) {
    std::int64_t b = 0, s = 0;
    if (p.ragged()) {
      b = static_cast<std::int64_t>(std::upper_bound(cu.begin(), cu.end(), row) - cu.begin()) - 1;
      s = row - cu[static_cast<std::size_t>(b)];
    } else {
      b = row / dm.smax;
      s = row % dm.smax;
    }
    float* dst = out + row * row_elems;
    for (std::int64_t h = 0; h < dm.heads; ++h)
      for (std::int64_t d = 0; d < dm.dim; ++d) dst[h * dm.dim + d] = sample(dist, r, seed, p, b, s, h, d);
  }
  return t;
}
}  // namespace

Qkv generate_qkv(const Problem& p, Distribution dist, std::uint64_t seed) {
  if (auto st = p.validate(); !st) throw Error("generate_qkv: problem '" + to_string(p) + "': " + st.reason());
  // sample() throws on an invalid enum value; an exception must not escape the OpenMP region.
  if (static_cast<std::size_t>(dist) >= kNames.size())
    throw Error("generate_qkv: invalid distribution value " + std::to_string(static_cast<int>(dist)));
  return {generate_one(p, dist, seed, Role::q), generate_one(p, dist, seed, Role::k),
          generate_one(p, dist, seed, Role::v)};
}

}  // namespace attest::datasets
