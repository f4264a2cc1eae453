// The production instantiation of the tiled engine (Bug::none) and its recipe plan.
#include "cpu/attn_fwd_tiled_impl.hpp"

namespace attest::kernels::cpu {

Plan make_plan(const Recipe& r) { return Plan{r, parse_scheme(r.q), parse_scheme(r.k), parse_scheme(r.v)}; }

std::string plan_unsupported(const Plan& p) {
  for (const Scheme* s : {&p.q, &p.k, &p.v}) {
    if (auto why = unsupported_reason(*s); !why.empty()) return why;
    if (s->kind != Scheme::Kind::f32 && s->kind != Scheme::Kind::cast)
      return "scheme " + s->head + ": quantized operands are not implemented by cpu.tiled yet";
  }
  if (p.recipe.exp2 == Exp2Policy::hw) return "exp2=hw has no bitwise model";
  if (p.recipe.rescale != RescalePolicy::always) return "rescale=conditional is not implemented by cpu.tiled yet";
  if (p.recipe.div != DivisionOp::ieee_div) return "div=" + std::string(name(p.recipe.div)) + " is not implemented by cpu.tiled yet";
  if (p.recipe.pscale != PScale::unit) return "pscale=" + std::string(name(p.recipe.pscale)) + " is not implemented by cpu.tiled yet";
  if (p.recipe.tile_kv > 1024) return "tile_kv > 1024";
  return {};
}

std::vector<std::string> tiled_configs() { return {"", "path=wrapper", "qtile=16"}; }

template void run_tiled<Bug::none>(const Args&, const Plan&);

}  // namespace attest::kernels::cpu
