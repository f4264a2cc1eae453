// The production instantiation of the tiled engine (Bug::none), its recipe plan and the
// production kernels cpu.tiled.<recipe>.
#include <algorithm>

#include "cpu/attn_fwd_tiled_impl.hpp"

namespace attest::kernels::cpu {

Plan make_plan(const Recipe& r) { return Plan{r, r.q, r.k, r.v}; }

std::string plan_unsupported(const Plan& p) {
  for (const Scheme* s : {&p.q, &p.k, &p.v})
    if (auto why = unsupported_reason(*s); !why.empty()) return why;
  const Recipe& r = p.recipe;
  if (r.exp2 == Exp2Policy::hw) return "exp2=hw has no bitwise model";
  if (r.tile_kv > 1024) return "tile_kv > 1024";
  if (r.pv_acc != FormatId::f32) return "pv_acc=" + std::string(name(r.pv_acc)) + " has no model in the tiled engine";
  const bool int8 = p.q.family == Scheme::Family::int8, mx = p.q.family == Scheme::Family::mx;
  if (int8 != (p.k.family == Scheme::Family::int8) || mx != (p.k.family == Scheme::Family::mx))
    return "Q and K must both be INT8, both MX, or both float";
  if ((r.p_mx || p.v.family == Scheme::Family::mx) && r.tile_kv % 32 != 0)
    return "MX P or V needs tile_kv to be a multiple of 32";
  if (r.p_mx && r.p_mx->family != Scheme::Family::mx) return "p_mx must be an MX scheme";
  if (p.v.family == Scheme::Family::mx && p.v.block != 32) return "MX V needs blocks of 32 tokens";
  if (r.p_mx && r.p_mx->block != 32) return "MX P needs blocks of 32 keys";
  return {};
}

std::vector<std::string> tiled_configs() { return {"", "path=wrapper", "qtile=16"}; }

template void run_tiled<Bug::none>(const Args&, const Plan&);

namespace {

// cpu.tiled.<recipe>: one kernel per named recipe (core/src/named_recipes.cpp) that the engine
// implements, so a recipe added there gets a CPU kernel with no list to keep here. The filter is
// plan_unsupported() of the recipe: a named recipe with a field the engine has no model for
// (exp2=hw, say) would otherwise register a kernel that refuses every case it declares, which
// the gate counts as a coverage failure. Every named recipe passes it today.
// Registered family by family, in the registry order that `attest list`, case expansion and
// reports show (named recipes within a family keep their order):
//   float     bf16, fp16, bf16_fa4, f32: Q, K, V and P rounded to the input dtype or kept in f32,
//             FP32 accumulation
//   int8      SageAttention2 INT8 Q/K with FP8 P and V (per block, per warp, per thread)
//   fp8       FP8 Q/K/V/P with per-tensor scales (FlashAttention-3 OCP, CK/AITER FNUZ)
//   mx        MXFP6/MXFP4 Q/K (optionally Hadamard-rotated) with FP8 or MXFP4 P and V (AITER mha_v4)
int family_rank(const Plan& p) {
  switch (p.q.family) {
    case Scheme::Family::identity:
    case Scheme::Family::cast: return 0;
    case Scheme::Family::int8: return 1;
    case Scheme::Family::fp8: return 2;
    case Scheme::Family::mx: return 3;
  }
  return 4;
}

std::vector<std::unique_ptr<Kernel>> tiled_kernels() {
  std::vector<std::pair<int, std::string_view>> ranked;
  for (const NamedRecipe& nr : named_recipes()) {
    const Plan plan = make_plan(parse_recipe(nr.name));
    if (plan_unsupported(plan).empty()) ranked.emplace_back(family_rank(plan), nr.name);
  }
  std::stable_sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<std::unique_ptr<Kernel>> v;
  for (const auto& [rank, r] : ranked)
    v.push_back(std::make_unique<TiledKernel<Bug::none>>("cpu.tiled." + std::string(r), std::string(r)));
  return v;
}

ATTEST_REGISTER_KERNELS(tiled_kernels);

}  // namespace

}  // namespace attest::kernels::cpu
