// layout: the same logical data through other storage gives the same bits (kernels that
// mis-handle a stride read the wrong elements, silently). First q, k, v and out each through its
// own storage (a transposed view, a KV-cache-style token slice, a head slice, padded head rows),
// alone and in mixes where all four differ, for kernels that declare explicit strides
// (Layout::strided); then the whole problem as bshd, bhsd, packed qkv and padded strides.
// Every variant keeps strides and offsets multiples of the kernel's declared row_align; the
// unaligned ones are listed as outside the declaration.
#include <algorithm>

#include <fmt/ranges.h>

#include "common.hpp"

namespace attest::conformance::checks {
namespace {

bool declared(const kernels::Kernel& k) { return k.capabilities().deterministic && k.capabilities().layouts.size() >= 2; }

bool declares(const kernels::Capabilities& c, Layout l) { return std::find(c.layouts.begin(), c.layouts.end(), l) != c.layouts.end(); }

std::string view_string(const Tensor& t) {
  return fmt::format("strides [{}], offset {}", fmt::join(t.strides(), ", "), t.offset());
}

nlohmann::json view_json(const Tensor& t) { return {{"strides", t.strides()}, {"offset", t.offset()}}; }

// Out (and lse) of `test` against the baseline: empty when identical, else "<what>: N of M ...".
std::string diff(const KernelOutput& test, const KernelOutput& base, const std::string& what, nlohmann::json& fig) {
  nlohmann::json mism;
  auto d = bit_diff(test.out, base.out, what, mism);
  if (d.empty() && !test.lse.empty() && !base.lse.empty()) d = bit_diff(test.lse, base.lse, what + " lse", mism);
  if (!d.empty()) fig["first_mismatches"] = mism;
  return d;
}

struct PerTensor {
  std::string label;  ///< "v: row_slice" / "mix 1"
  TensorStorage st;
  int only = -1;      ///< the one tensor (0..3) not natural, -1 for a mix
};

std::vector<PerTensor> per_tensor_variants() {
  constexpr Storage kinds[] = {Storage::transposed, Storage::row_slice, Storage::head_slice, Storage::padded};
  constexpr const char* names[] = {"q", "k", "v", "out"};
  std::vector<PerTensor> v;
  for (int t = 0; t < 4; ++t)
    for (Storage k : kinds) {
      PerTensor pt;
      Storage* slot[] = {&pt.st.q, &pt.st.k, &pt.st.v, &pt.st.out};
      *slot[t] = k;
      pt.only = t;
      pt.label = std::string(names[t]) + ": " + std::string(storage_name(k));
      v.push_back(pt);
    }
  // Mixes: all four tensors through different storage (three rotations).
  for (int m = 0; m < 3; ++m) {
    PerTensor pt;
    Storage* slot[] = {&pt.st.q, &pt.st.k, &pt.st.v, &pt.st.out};
    std::string what;
    for (int t = 0; t < 4; ++t) {
      *slot[t] = kinds[(t + m) % 4];
      what += fmt::format("{}{} {}", t ? ", " : "", names[t], storage_name(kinds[(t + m) % 4]));
    }
    pt.label = fmt::format("mix {} ({})", m + 1, what);
    v.push_back(pt);
  }
  return v;
}

Outcome other_layouts(Context& ctx, nlohmann::json& fig) {
  const Problem& p = ctx.problem();
  const auto& caps = ctx.caps();
  const std::int64_t align = std::max<std::int64_t>(1, caps.row_align);
  const auto& base = ctx.baseline();  // computed before the variants, as the other parity checks do
  fig["variants"] = nlohmann::json::array();
  fig["layouts"] = nlohmann::json::array();
  fig["skipped"] = nlohmann::json::array();
  const std::string outside = fmt::format("outside the declaration (row_align = {})", align);

  // 1. Independent per-tensor storage.
  if (declares(caps, Layout::strided)) {
    const Problem pe = explicit_strides(p);
    if (const auto st = ctx.kernel().supports(pe, ctx.recipe()); !st) {
      fig["skipped"].push_back("per-tensor layouts (refused: " + st.reason() + ")");
    } else {
      const std::int64_t pad = align > 1 ? align : 3;
      if (align > 1) fig["skipped"].push_back("padded rows with pad 3: " + outside);
      const char* names[] = {"q", "k", "v", "out"};
      for (const auto& v : per_tensor_variants()) {
        const auto in = make_inputs(p, ctx.inputs(), v.st, pad, 0, 0);
        auto outs = make_outputs(p, v.st, pad, 0, 0, 0x7FC0DEADu, caps.lse);
        const Tensor* ts[] = {&in.q, &in.k, &in.v, &outs.out};
        nlohmann::json e{{"variant", v.label}};
        for (int t = 0; t < 4; ++t) e[names[t]] = view_json(*ts[t]);
        const kernels::Args args{pe, ctx.recipe(), in.q, in.k, in.v, outs.out, nullptr, ""};
        if (const auto al = kernels::aligned_rows(caps, args); !al) {
          fig["skipped"].push_back(v.label + ": " + outside + ": " + al.reason());
          continue;
        }
        fig["variants"].push_back(e);
        const std::string what = v.only >= 0 ? v.label + " view (" + view_string(*ts[v.only]) + ")" : v.label;
        const auto res = ctx.run_on(pe, in, std::move(outs), "");
        if (auto d = diff(res, base, what, fig); !d.empty()) return failed(d, fig);
      }
    }
  }

  // 2. The whole problem in each other declared layout.
  for (const Layout l : caps.layouts) {
    if (l == p.layout && l != Layout::strided) continue;
    const bool packable = p.seqlen_q == p.seqlen_kv && p.cu_seqlens_q == p.cu_seqlens_kv && p.head_dim == p.head_dim_v;
    if (l == Layout::packed_qkv && !packable) {
      fig["skipped"].push_back("packed_qkv (needs S == T and D == Dv)");
      continue;
    }
    RunSetup s;
    s.layout = l;
    // A pad the problem does not already use, a multiple of row_align.
    s.pad = align > 1 ? (p.layout == Layout::strided ? p.pad + align : align) : (p.layout == Layout::strided ? p.pad + 5 : 3);
    if (l == Layout::strided && align > 1) fig["skipped"].push_back("strided:pad=3: " + outside);
    Problem pv = p;
    pv.layout = l;
    pv.pad = l == Layout::strided ? s.pad : 0;
    if (const auto st = ctx.kernel().supports(pv, ctx.recipe()); !st) {
      fig["skipped"].push_back(std::string(layout_name(l)) + " (refused: " + st.reason() + ")");
      continue;
    }
    fig["layouts"].push_back(to_string(pv));
    fig["variants"].push_back({{"variant", to_string(pv)}});
    if (auto d = rerun_diff(ctx, p, s, std::string(layout_name(l)), fig); !d.empty()) return failed(d, fig);
  }
  if (fig["variants"].empty()) return unsupported("kernel supports no other layout for this problem");
  return passed(fig);
}

}  // namespace

std::unique_ptr<Check> make_layout() {
  return make_parity_check("layout",
                           "q, k, v, out each through its own storage, and bshd / bhsd / packed_qkv / strided, give the "
                           "same bits",
                           other_layouts, declared);
}

}  // namespace attest::conformance::checks
