// The production instantiation of the tiled engine (Bug::none) and its recipe plan.
#include "cpu/attn_fwd_tiled_impl.hpp"

namespace attest::kernels::cpu {

Plan make_plan(const Recipe& r) { return Plan{r, parse_scheme(r.q), parse_scheme(r.k), parse_scheme(r.v)}; }

std::string plan_unsupported(const Plan& p) {
  for (const Scheme* s : {&p.q, &p.k, &p.v})
    if (auto why = unsupported_reason(*s); !why.empty()) return why;
  const Recipe& r = p.recipe;
  if (r.exp2 == Exp2Policy::hw) return "exp2=hw has no bitwise model";
  if (r.tile_kv > 1024) return "tile_kv > 1024";
  const bool int8 = p.q.kind == Scheme::Kind::int8, mx = p.q.kind == Scheme::Kind::mx;
  if (int8 != (p.k.kind == Scheme::Kind::int8) || mx != (p.k.kind == Scheme::Kind::mx))
    return "Q and K must both be INT8, both MX, or both float";
  if ((!r.p_mx.empty() || p.v.kind == Scheme::Kind::mx) && r.tile_kv % 32 != 0)
    return "MX P or V needs tile_kv to be a multiple of 32";
  if (!r.p_mx.empty() && parse_scheme(r.p_mx).kind != Scheme::Kind::mx) return "p_mx must be an MX scheme";
  if (p.v.kind == Scheme::Kind::mx && p.v.block != 32) return "MX V needs blocks of 32 tokens";
  if (!r.p_mx.empty() && parse_scheme(r.p_mx).block != 32) return "MX P needs blocks of 32 keys";
  return {};
}

std::vector<std::string> tiled_configs() { return {"", "path=wrapper", "qtile=16"}; }

template void run_tiled<Bug::none>(const Args&, const Plan&);

}  // namespace attest::kernels::cpu
