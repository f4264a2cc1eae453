// split_kv: the KV sequence split in two halves, each run separately, combined through their
// LSEs (m = max(l1, l2); o = (e^(l1-m) o1 + e^(l2-m) o2) / (e^(l1-m) + e^(l2-m)); lse = m +
// log(e^(l1-m) + e^(l2-m)), in double) equals the full run within the noise floor. This is how
// split-KV decode kernels and ring attention merge partial results; a wrong LSE (natural vs
// base-2 log, missing scale) shows up here.
//
// What splitting itself moves is the recipe's business: each half rounds its own output, and a
// quantized recipe quantizes each half on its own (per-block scales, K smoothing means and V
// scales over fewer tokens, P offsets from the half's row max). So the budget is the same split
// done by the emulator, metric(merge(emu(h1), emu(h2)), emu(full)), and the rule of the split_kv
// row is measured <= alpha * that + beta * floor + eps, with measured = metric(merge(K(h1),
// K(h2)), K(full)) and floor = metric(emu_rev, emu) + sensitivity. The sensitivity is what one
// float32 ulp of each stored partial LSE (l1 up, l2 down) moves the kernel's merge: the merge
// weights are exp(l1 - l2) relative, so a rounded LSE near 1000 (outlier fills) moves the output
// by ulp(l) * |o1 - o2| / 4 however exact everything else is. A bitwise kernel meets the rule
// with measured == budget.
#include <cmath>

#include "common.hpp"

namespace attest::conformance::checks {
namespace {

struct Merged {
  Tensor out, lse;  // f64
};

Merged merge(const Tensor& out1, const Tensor& lse1, const Tensor& out2, const Tensor& lse2) {
  const auto o1 = out1.view<float, 4>(), o2 = out2.view<float, 4>();
  const auto l1 = lse1.view<float, 3>(), l2 = lse2.view<float, 3>();
  Merged m{Tensor(DType::f64, out1.shape()), Tensor(DType::f64, lse1.shape())};
  const auto vo = m.out.view<double, 4>();
  const auto vl = m.lse.view<double, 3>();
  for (std::int64_t b = 0; b < o1.shape[0]; ++b)
    for (std::int64_t s = 0; s < o1.shape[1]; ++s)
      for (std::int64_t h = 0; h < o1.shape[2]; ++h) {
        const double a = l1(b, h, s), z = l2(b, h, s), mx = std::max(a, z);
        if (mx == -INFINITY) {
          vl(b, h, s) = -INFINITY;
          for (std::int64_t d = 0; d < o1.shape[3]; ++d) vo(b, s, h, d) = 0;
          continue;
        }
        const double w1 = std::exp(a - mx), w2 = std::exp(z - mx), w = w1 + w2;
        vl(b, h, s) = mx + std::log(w);
        for (std::int64_t d = 0; d < o1.shape[3]; ++d) vo(b, s, h, d) = (w1 * o1(b, s, h, d) + w2 * o2(b, s, h, d)) / w;
      }
  return m;
}

MetricSet plus(MetricSet a, const MetricSet& b) {
  for (auto& [k, v] : a)
    if (auto it = b.find(k); it != b.end()) v += it->second;
  return a;
}

Outcome merged_halves(const Check& self, Context& ctx) {
  const Problem& p = ctx.problem();
  const auto& c = ctx.caps();
  if (!c.lse) return unsupported("kernel writes no LSE");
  if (p.mask != Mask::none) return unsupported("split-KV merge is checked on unmasked problems");
  if (p.ragged()) return unsupported("split-KV merge is checked on non-ragged problems");
  if (p.seqlen_kv < 2) return unsupported("needs at least 2 keys");
  const std::int64_t T1 = p.seqlen_kv / 2;
  Problem p1 = p, p2 = p;
  p1.seqlen_kv = T1;
  p2.seqlen_kv = p.seqlen_kv - T1;
  for (const Problem* q : {&p1, &p2})
    if (auto st = ctx.kernel().supports(*q, ctx.recipe()); !st) return unsupported("half problem refused: " + st.reason());
  const auto& in = ctx.inputs();
  const datasets::Qkv h1{in.q, token_slice(in.k, 0, T1), token_slice(in.v, 0, T1)};
  const datasets::Qkv h2{in.q, token_slice(in.k, T1, p.seqlen_kv), token_slice(in.v, T1, p.seqlen_kv)};
  const auto r1 = ctx.run(p1, h1), r2 = ctx.run(p2, h2);
  const auto& full = ctx.baseline();
  const auto e1 = ctx.emulate(p1, h1.q, h1.k, h1.v), e2 = ctx.emulate(p2, h2.q, h2.k, h2.v);
  const auto& emu = ctx.emu();
  const auto& rev = ctx.emu_rev();

  const auto km = merge(r1.out, r1.lse, r2.out, r2.lse);
  const auto em = merge(e1.out, e1.lse, e2.out, e2.lse);
  const auto m_out = metrics::compare(km.out, full.out), m_lse = metrics::compare(km.lse, full.lse);
  const auto b_out = metrics::compare(em.out, emu.out), b_lse = metrics::compare(em.lse, emu.lse);
  const auto f_out = metrics::compare(rev.out, emu.out), f_lse = metrics::compare(rev.lse, emu.lse);
  const auto ks = merge(r1.out, bump_ulp(r1.lse, INFINITY), r2.out, bump_ulp(r2.lse, -INFINITY));
  const auto s_out = metrics::compare(ks.out, km.out), s_lse = metrics::compare(ks.lse, km.lse);
  nlohmann::json fig, j;
  metrics::to_json(j, m_out);
  fig["out"] = j;
  metrics::to_json(j, m_lse);
  fig["lse"] = j;
  fig["split"] = {T1, p.seqlen_kv - T1};
  if (m_out.nonfinite_mismatches > 0 || m_lse.nonfinite_mismatches > 0)
    return mistrusted("merged halves have NaN/Inf where the full run has none", fig);
  if (m_out.norm_ref == 0) return mistrusted("full output has norm 0: the merge check detects nothing", fig);
  const auto& row = ctx.tolerances().lookup(ctx.recipe_label(), self.name());
  const auto jd = judge(row, metric_set(m_out, &m_lse), metric_set(b_out, &b_lse),
                        plus(metric_set(f_out, &f_lse), metric_set(s_out, &s_lse)));
  nlohmann::json js;
  metrics::to_json(js, s_out);
  fig["lse_ulp_sensitivity"] = js;
  fig["judgement"] = jd.figures;
  if (!jd.pass) return failed("merged halves vs full run: " + jd.reason, fig);
  return passed(fig);
}

}  // namespace
std::unique_ptr<Check> make_split_kv() {
  return make_check("split_kv", "two KV halves merged through their LSEs equal the full run", merged_halves,
                    [](const kernels::Kernel& k) { return k.capabilities().lse; });
}
}  // namespace attest::conformance::checks
