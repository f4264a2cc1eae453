// layout: the same logical data as bshd, bhsd, packed qkv and padded strides gives the same
// bits (kernels that mis-handle a stride read the wrong elements, silently).
#include "common.hpp"

namespace attest::conformance::checks {
namespace {

bool declared(const kernels::Kernel& k) { return k.capabilities().deterministic && k.capabilities().layouts.size() >= 2; }

Outcome other_layouts(Context& ctx, nlohmann::json& fig) {
  const Problem& p = ctx.problem();
  (void)ctx.baseline();  // computed before the variants, as the other parity checks do
  fig["layouts"] = nlohmann::json::array();
  fig["skipped"] = nlohmann::json::array();
  for (const Layout l : ctx.caps().layouts) {
    if (l == p.layout && l != Layout::strided) continue;
    const bool packable = p.seqlen_q == p.seqlen_kv && p.cu_seqlens_q == p.cu_seqlens_kv && p.head_dim == p.head_dim_v;
    if (l == Layout::packed_qkv && !packable) {
      fig["skipped"].push_back("packed_qkv (needs S == T and D == Dv)");
      continue;
    }
    RunSetup s;
    s.layout = l;
    s.pad = p.layout == Layout::strided ? p.pad + 5 : 3;  // a pad the problem does not already use
    Problem pv = p;
    pv.layout = l;
    pv.pad = l == Layout::strided ? s.pad : 0;
    if (!ctx.kernel().supports(pv, ctx.recipe())) {
      fig["skipped"].push_back(std::string(layout_name(l)) + " (refused: " + ctx.kernel().supports(pv, ctx.recipe()).reason() + ")");
      continue;
    }
    fig["layouts"].push_back(to_string(pv));
    if (auto d = rerun_diff(ctx, p, s, std::string(layout_name(l)), fig); !d.empty()) return failed(d, fig);
  }
  if (fig["layouts"].empty()) return unsupported("kernel supports no other layout for this problem");
  return passed(fig);
}

}  // namespace

std::unique_ptr<Check> make_layout() {
  return make_parity_check("layout", "bshd / bhsd / packed_qkv / strided views give the same bits", other_layouts, declared);
}

}  // namespace attest::conformance::checks
