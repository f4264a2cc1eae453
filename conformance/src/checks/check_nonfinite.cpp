// nonfinite: the NaN/Inf policy. A NaN in one input poisons only the rows that see it:
//   q[b0,i0,h0,0] = NaN   -> row (b0,i0,h0): out all NaN, lse NaN
//   k[b0,j0,g0,0] = NaN   -> rows of heads in group g0 whose visible keys include j0: out and lse NaN
//   v[b0,j0,g0,:] = NaN   -> the same rows: out all NaN, lse unchanged
//   q[b0,i0,h0,0] = +Inf  -> row (b0,i0,h0): out and lse non-finite, or (0, -inf) when every
//                            logit became -inf (the row then sees nothing)
// every other row keeps the bits of the clean run (the reference's documented semantics). With
// the tolerance row's nan_policy "emulator", the poisoned set is what the recipe emulator
// poisons on the same input instead (a per-block or per-tensor quantization scale spreads a
// NaN across its block by design).
#include <cmath>
#include <limits>
#include <vector>

#include "common.hpp"

namespace attest::conformance::checks {
namespace {

struct Injection {
  const char* name;
  int role;  // 0 q, 1 k, 2 v
  float value;
  bool whole_row;
  bool lse_poisoned;
};

Outcome nan_policy(const Check& self, Context& ctx) {
  const Problem& p = ctx.problem();
  const auto& row = ctx.tolerances().lookup(ctx.recipe_label(), self.name());
  std::int64_t b0 = -1;
  for (std::int64_t b = p.batch; b-- > 0;)
    if (p.len_q(b) > 0 && p.len_kv(b) > 0 && p.visible_keys(b, p.len_q(b) - 1) > 0) {
      b0 = b;
      break;
    }
  if (b0 < 0) return unsupported("no query row sees a key");
  const std::int64_t i0 = p.len_q(b0) - 1, h0 = p.heads_q - 1, g0 = h0 / p.group();
  const std::int64_t j0 = std::min(p.len_kv(b0) / 2, p.visible_keys(b0, i0) - 1);
  const auto [qb, qs] = q_pos(p, b0, i0);
  const auto [kb, ks] = kv_pos(p, b0, j0);
  const auto& clean = ctx.baseline();
  const bool det = ctx.caps().deterministic;
  const Injection injections[] = {{"q NaN", 0, std::numeric_limits<float>::quiet_NaN(), false, true},
                                  {"k NaN", 1, std::numeric_limits<float>::quiet_NaN(), false, true},
                                  {"v NaN row", 2, std::numeric_limits<float>::quiet_NaN(), true, false},
                                  {"q +Inf", 0, std::numeric_limits<float>::infinity(), false, true}};
  nlohmann::json fig;
  fig["policy"] = row.nan_policy == NanPolicy::rows ? "rows" : "emulator";
  fig["position"] = {{"batch", b0}, {"query_row", i0}, {"head", h0}, {"key", j0}, {"kv_head", g0}};
  for (const auto& inj : injections) {
    datasets::Qkv in{ctx.inputs().q.contiguous(), ctx.inputs().k.contiguous(), ctx.inputs().v.contiguous()};
    if (inj.role == 0) in.q.view<float, 4>()(qb, qs, h0, 0) = inj.value;
    if (inj.role == 1) in.k.view<float, 4>()(kb, ks, g0, 0) = inj.value;
    if (inj.role == 2)
      for (std::int64_t d = 0; d < p.head_dim_v; ++d) in.v.view<float, 4>()(kb, ks, g0, d) = inj.value;
    const auto res = ctx.run(p, in);
    std::optional<ref::EmulatorOutput> emu;
    if (row.nan_policy == NanPolicy::emulator) emu = ctx.emulate(p, in.q, in.k, in.v);

    const auto o = res.out.view<float, 4>(), oc = clean.out.view<float, 4>();
    std::int64_t expected = 0, wrong = 0;
    std::string first;
    for (std::int64_t b = 0; b < p.batch; ++b)
      for (std::int64_t i = 0; i < p.len_q(b); ++i)
        for (std::int64_t h = 0; h < p.heads_q; ++h) {
          const auto [bb, ss] = q_pos(p, b, i);
          bool hit = false;
          if (emu) {
            for (std::int64_t d = 0; d < o.shape[3]; ++d) hit = hit || std::isnan(emu->out.view<float, 4>()(bb, ss, h, d));
          } else if (b == b0) {
            hit = inj.role == 0 ? (i == i0 && h == h0) : (h / p.group() == g0 && p.visible_keys(b, i) > j0);
          }
          expected += hit;
          bool ok = true;
          for (std::int64_t d = 0; d < o.shape[3] && ok; ++d) {
            const float v = o(bb, ss, h, d), c = oc(bb, ss, h, d);
            if (hit) ok = emu ? std::isnan(v) == std::isnan(emu->out.view<float, 4>()(bb, ss, h, d))
                              : (std::isinf(inj.value) ? !std::isfinite(v) || v == 0.0f : std::isnan(v));
            else ok = det ? bits_of(v) == bits_of(c) : std::isfinite(v) == std::isfinite(c);
          }
          if (!res.lse.empty() && ok) {
            const float l = res.lse.view<float, 3>()(bb, h, ss), lc = clean.lse.view<float, 3>()(bb, h, ss);
            if (hit && inj.lse_poisoned) ok = emu ? std::isnan(l) == std::isnan(emu->lse.view<float, 3>()(bb, h, ss))
                                                  : std::isinf(inj.value) ? !std::isfinite(l) : std::isnan(l);
            else ok = det ? bits_of(l) == bits_of(lc) : std::isfinite(l) == std::isfinite(lc);
          }
          if (!ok) {
            if (wrong++ == 0)
              first = fmt::format("batch {} row {} head {} ({})", b, i, h, hit ? "should be poisoned" : "should be clean");
          }
        }
    fig[inj.name] = {{"poisoned_rows_expected", expected}, {"wrong_rows", wrong}};
    if (expected == 0) return mistrusted(std::string(inj.name) + ": no row sees the injected value", fig);
    if (wrong > 0)
      return failed(fmt::format("{}: {} (row, head) pairs break the NaN policy; first: {}", inj.name, wrong, first), fig);
  }
  return passed(fig);
}

}  // namespace
std::unique_ptr<Check> make_nonfinite() { return make_check("nonfinite", "a NaN/Inf poisons only the rows that see it", nan_policy); }
}  // namespace attest::conformance::checks
