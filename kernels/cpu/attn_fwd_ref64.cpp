// cpu.ref64: an FP64 attention kernel, written independently of reference/attention (plain
// loops, direct algorithm: materialise a row's logits, max, exp, sum, divide), whose results are
// rounded once to float32. It models no low-precision recipe: it declares the f32 "no rounding"
// recipe and has no bitwise contract (its FP64 arithmetic is not what the emulator models).
//
// Per output row (b, i, h), g = h / (H / Hkv), visible keys [0, hi):
//   s_j = scale * dot(q_i, k_j)  (double, d ascending);  m = max_j s_j
//   p_j = exp(s_j - m);  l = sum_j p_j (j ascending);  out = (sum_j p_j v_j) / l;  lse = m + log(l)
// A row with no visible key or with l == 0 (all logits -inf) gets out = 0 and lse = -inf; a NaN
// logit makes the row NaN. Each row depends only on its own data: deterministic for any thread
// count, layout or stride.
#include <cmath>
#include <limits>
#include <vector>

#include "attest/kernels/kernel.hpp"
#include "cpu/cpu_io.hpp"

namespace attest::kernels::cpu {
namespace {

constexpr const char* kF32Recipe = "q=f32;k=f32;v=f32;p=f32;out=f32";

class Ref64 final : public Kernel {
 public:
  std::string name() const override { return "cpu.ref64"; }
  std::string backend() const override { return "cpu"; }
  std::vector<std::string> recipes() const override { return {recipe_label(parse_recipe(kF32Recipe))}; }
  Capabilities capabilities() const override {
    Capabilities c;
    c.deterministic = true;
    c.bitwise = false;
    return c;
  }

  void run(const Args& a) override {
    const Problem& p = a.problem;
    if (auto st = supports(p, a.recipe); !st) throw Error(name() + ": " + st.reason());
    check_args(p, a.q, a.k, a.v, a.out, a.lse);
    const auto q = token_view<const float>(a.q, p, false);
    const auto k = token_view<const float>(a.k, p, true);
    const auto v = token_view<const float>(a.v, p, true);
    const auto o = token_view<float>(a.out, p, false);
    LseView lse;
    if (a.lse != nullptr) lse = lse_view(*a.lse, p);
    const double scale = p.scale();
    const std::int64_t D = p.head_dim, Dv = p.head_dim_v, H = p.heads_q, grp = p.group();
    const double ninf = -std::numeric_limits<double>::infinity();

#pragma omp parallel for collapse(2) schedule(dynamic)
    for (std::int64_t b = 0; b < p.batch; ++b) {
      for (std::int64_t h = 0; h < H; ++h) {
        const std::int64_t g = h / grp, S = p.len_q(b), T = p.len_kv(b);
        std::vector<double> s(static_cast<std::size_t>(T)), acc(static_cast<std::size_t>(Dv));
        for (std::int64_t i = 0; i < S; ++i) {
          const std::int64_t hi = std::clamp<std::int64_t>(p.visible_keys(b, i), 0, T);
          const float* qi = q.row(b, i, h);
          double m = ninf;
          bool nan = false;
          for (std::int64_t j = 0; j < hi; ++j) {
            const float* kj = k.row(b, j, g);
            double dot = 0;
            for (std::int64_t d = 0; d < D; ++d) dot += static_cast<double>(qi[d * q.sd]) * kj[d * k.sd];
            const double sj = scale * dot;
            nan = nan || std::isnan(sj);
            s[static_cast<std::size_t>(j)] = sj;
            m = std::max(m, sj);
          }
          std::fill(acc.begin(), acc.end(), 0.0);
          double l = 0;
          if (!nan && m != ninf) {
            for (std::int64_t j = 0; j < hi; ++j) {
              const double pj = std::exp(s[static_cast<std::size_t>(j)] - m);
              l += pj;
              const float* vj = v.row(b, j, g);
              for (std::int64_t d = 0; d < Dv; ++d) acc[static_cast<std::size_t>(d)] += pj * vj[d * v.sd];
            }
          }
          float* oi = o.row(b, i, h);
          double row_lse = 0;
          if (nan) {
            row_lse = std::numeric_limits<double>::quiet_NaN();
            for (std::int64_t d = 0; d < Dv; ++d) oi[d * o.sd] = std::numeric_limits<float>::quiet_NaN();
          } else if (l == 0) {
            row_lse = ninf;
            for (std::int64_t d = 0; d < Dv; ++d) oi[d * o.sd] = 0.0f;
          } else {
            row_lse = m + std::log(l);
            for (std::int64_t d = 0; d < Dv; ++d) oi[d * o.sd] = static_cast<float>(acc[static_cast<std::size_t>(d)] / l);
          }
          if (a.lse != nullptr) lse.at(b, h, i) = static_cast<float>(row_lse);
        }
      }
    }
  }
};

ATTEST_REGISTER_KERNEL(Ref64);

}  // namespace
}  // namespace attest::kernels::cpu
