// masked_rows: query rows that see no key give out = 0 and lse = -inf (FlashAttention's
// convention); the other rows stay finite. When the case problem has no fully-masked row, a
// variant is built that has some: bottom-right causal with T = S/2 (rows i < S - T see
// nothing), or a ragged batch whose first element has no keys.
#include <cmath>

#include "common.hpp"

namespace attest::conformance::checks {
namespace {

bool has_masked_row(const Problem& p) {
  for (std::int64_t b = 0; b < p.batch; ++b)
    for (std::int64_t i = 0; i < p.len_q(b); ++i)
      if (p.visible_keys(b, i) <= 0) return true;
  return false;
}

class MaskedRows final : public Check {
 public:
  bool declared_by(const kernels::Kernel& k) const override {
    const auto c = k.capabilities();
    return std::find(c.masks.begin(), c.masks.end(), Mask::causal_br) != c.masks.end() && (c.cross || c.ragged);
  }
  std::string_view name() const override { return "masked_rows"; }
  std::string_view summary() const override { return "rows that see no key give 0 and lse -inf"; }
  Outcome run(Context& ctx) const override {
    Problem p = ctx.problem();
    auto& k = ctx.kernel();
    if (!has_masked_row(p)) {
      Problem a = p;
      a.mask = Mask::causal_br;
      a.seqlen_kv = std::max<std::int64_t>(1, p.seqlen_q / 2);
      a.cu_seqlens_q.clear();
      a.cu_seqlens_kv.clear();
      Problem r = p;
      r.batch = 2;
      r.mask = Mask::none;
      r.cu_seqlens_q = {0, p.seqlen_q, 2 * p.seqlen_q};
      r.cu_seqlens_kv = {0, 0, p.seqlen_kv};
      if (p.seqlen_q >= 2 && a.validate() && k.supports(a, ctx.recipe())) p = a;
      else if (r.validate() && k.supports(r, ctx.recipe())) p = r;
      else return unsupported("kernel supports no problem with a fully-masked row (needs causal_br cross or ragged)");
    }
    const auto res = p == ctx.problem() ? ctx.baseline() : ctx.run(p, ctx.inputs_for(p));
    const auto o = res.out.view<float, 4>();
    const bool lse = !res.lse.empty();
    std::int64_t masked = 0, bad = 0, nonfinite = 0;
    std::string first;
    for (std::int64_t b = 0; b < p.batch; ++b)
      for (std::int64_t i = 0; i < p.len_q(b); ++i) {
        const auto [bb, ss] = q_pos(p, b, i);
        const bool none = p.visible_keys(b, i) <= 0;
        masked += none;
        for (std::int64_t h = 0; h < p.heads_q; ++h) {
          bool ok = true;
          for (std::int64_t d = 0; d < o.shape[3]; ++d) {
            const float v = o(bb, ss, h, d);
            if (none ? v != 0.0f : !std::isfinite(v)) ok = false;
          }
          if (lse) {
            const float l = res.lse.view<float, 3>()(bb, h, ss);
            if (none ? !(std::isinf(l) && l < 0) : !std::isfinite(l)) ok = false;
          }
          if (!ok) {
            (none ? bad : nonfinite) += 1;
            if (first.empty())
              first = fmt::format("batch {} row {} head {} ({})", b, i, h, none ? "fully masked" : "has keys");
          }
        }
      }
    nlohmann::json fig{{"problem", to_string(p)}, {"masked_rows", masked}, {"bad_masked_rows", bad},
                       {"nonfinite_visible_rows", nonfinite}};
    if (masked == 0) return mistrusted("variant has no fully-masked row", fig);
    if (bad || nonfinite)
      return failed(fmt::format("{} fully-masked (row, head) pairs not (0, -inf), {} visible ones non-finite; first: {}", bad,
                                nonfinite, first),
                    fig);
    return passed(fig);
  }
};

}  // namespace
std::unique_ptr<Check> make_masked_rows() { return std::make_unique<MaskedRows>(); }
}  // namespace attest::conformance::checks
