// refusal: every problem the kernel's declared capabilities exclude (a head dim, mask or layout
// not listed, GQA, cross attention, ragged batches, head_dim_v != head_dim) and a recipe it does
// not implement are UNSUPPORTED with a reason by supports(), and run() on them throws
// attest::Error without writing the output: never silently computed as something else. A case the
// kernel admits but refuses at call time (kernels::KernelRefused, e.g. torch's "No available
// kernel") or in supports() is one failed row here; every other check of that case is
// UNSUPPORTED pointing at it.
#include <algorithm>

#include "common.hpp"

namespace attest::conformance::checks {
namespace {

struct Variant {
  std::string what;
  Problem problem;
  Recipe recipe;
};

// float32 zeros in generate_qkv's logical shapes (packed varlen [1, total, H, D] when ragged).
datasets::Qkv zero_inputs(const Problem& p) {
  const bool rag = p.ragged();
  const std::int64_t b = rag ? 1 : p.batch, s = rag ? p.cu_seqlens_q.back() : p.seqlen_q,
                     t = rag ? p.cu_seqlens_kv.back() : p.seqlen_kv;
  const auto zeros = [](std::vector<std::int64_t> shape) {
    Tensor x(DType::f32, std::move(shape));
    std::fill_n(x.data<float>(), x.numel(), 0.0f);
    return x;
  };
  return {zeros({b, s, p.heads_q, p.head_dim}), zeros({b, t, p.heads_kv, p.head_dim}),
          zeros({b, t, p.heads_kv, p.head_dim_v})};
}

std::vector<Variant> variants(const Context& ctx) {
  const Problem& p = ctx.problem();
  const auto& c = ctx.caps();
  std::vector<Variant> v;
  auto add = [&](std::string what, Problem q) {
    if (q.validate()) v.push_back({std::move(what), std::move(q), ctx.recipe()});
  };
  if (!c.head_dims.empty()) {
    for (std::int64_t d : {40, 72, 24, 8, 256, 512})
      if (std::find(c.head_dims.begin(), c.head_dims.end(), d) == c.head_dims.end()) {
        Problem q = p;
        q.head_dim = q.head_dim_v = d;
        add("head_dim " + std::to_string(d), q);
        break;
      }
  }
  for (Mask m : {Mask::none, Mask::causal_tl, Mask::causal_br})
    if (std::find(c.masks.begin(), c.masks.end(), m) == c.masks.end()) {
      Problem q = p;
      q.mask = m;
      add("mask " + std::string(mask_name(m)), q);
    }
  for (Layout l : {Layout::bshd, Layout::bhsd, Layout::packed_qkv, Layout::strided})
    if (std::find(c.layouts.begin(), c.layouts.end(), l) == c.layouts.end()) {
      Problem q = p;
      q.layout = l;
      q.pad = l == Layout::strided ? 3 : 0;
      if (l == Layout::packed_qkv) {
        q.head_dim_v = q.head_dim;
        q.seqlen_kv = q.seqlen_q;
        q.cu_seqlens_kv = q.cu_seqlens_q;
      }
      add("layout " + std::string(layout_name(l)), q);
    }
  if (!c.gqa) {
    Problem q = p;
    q.heads_kv = std::max<std::int64_t>(1, p.heads_kv);
    q.heads_q = 2 * q.heads_kv;
    add("GQA", q);
  }
  if (!c.cross) {
    Problem q = p;
    q.cu_seqlens_q.clear();
    q.cu_seqlens_kv.clear();
    q.seqlen_kv = p.seqlen_q + 16;
    add("cross attention", q);
  }
  if (!c.ragged) {
    Problem q = p;
    q.batch = 2;
    const std::int64_t s2 = std::max<std::int64_t>(1, p.seqlen_q / 2), t2 = std::max<std::int64_t>(1, p.seqlen_kv / 2);
    q.cu_seqlens_q = {0, p.seqlen_q, p.seqlen_q + s2};
    q.cu_seqlens_kv = {0, t2, t2 + p.seqlen_kv};
    add("ragged batch", q);
  }
  if (!c.head_dim_v) {
    Problem q = p;
    q.head_dim_v = p.head_dim == 1 ? 2 : p.head_dim / 2;
    if (q.layout == Layout::packed_qkv) q.layout = Layout::bshd;
    add("head_dim_v != head_dim", q);
  }
  if (!c.causal_cross) {
    Problem q = p;
    if (q.mask == Mask::none)
      for (Mask m : {Mask::causal_br, Mask::causal_tl})
        if (std::find(c.masks.begin(), c.masks.end(), m) != c.masks.end()) q.mask = m;
    if (q.mask == Mask::none) q.mask = Mask::causal_br;
    q.cu_seqlens_q.clear();
    q.cu_seqlens_kv.clear();
    q.seqlen_kv = p.seqlen_q + 16;
    add("causal with S != T", q);
  }
  if (c.row_align > 1 && std::find(c.layouts.begin(), c.layouts.end(), Layout::strided) != c.layouts.end()) {
    Problem q = p;
    if (q.layout == Layout::packed_qkv) q.layout = Layout::bshd;
    q.layout = Layout::strided;
    q.pad = 1;
    while ((q.head_dim + q.pad) % c.row_align == 0) ++q.pad;
    add("rows not aligned to row_align " + std::to_string(c.row_align), q);
  }
  Recipe r = ctx.recipe();
  r.tile_kv = 7;  // no kernel lists a recipe with 7-key tiles: its label is a full string nobody implements
  v.push_back({"recipe " + attest::recipe_label(r), p, r});
  return v;
}

class Refusal final : public Check {
 public:
  // Judges refusals: a kernel that refuses nothing has nothing here, which is no coverage hole.
  bool declared_by(const kernels::Kernel&) const override { return false; }
  std::string_view name() const override { return "refusal"; }
  std::string_view summary() const override { return "excluded problems/recipes are refused with a reason, never computed"; }
  bool needs_support() const override { return false; }
  Outcome run(Context& ctx) const override {
    if (ctx.support()) {
      // A case inside the declaration that the kernel refuses only when called: judged here
      // once (the other checks of the case are UNSUPPORTED pointing at this row).
      try {
        (void)ctx.baseline();
      } catch (const VerdictError&) {
        // A fault or an error of the baseline is the other checks' verdict, not a refusal.
      }
      if (const auto& why = ctx.runtime_refusal())
        return failed("refuses at call time a case inside its declared capabilities: " + *why,
                      {{"variants", nlohmann::json::array({{{"variant", "the case itself"},
                                                            {"problem", to_string(ctx.problem())},
                                                            {"run_error", *why}}})}});
    }
    if (!ctx.support() && !ctx.caps().supports_declares &&
        kernels::declared_support(ctx.kernel(), ctx.problem(), ctx.recipe()))
      // supports() refuses what recipes() and capabilities() declare: the one failed row of the
      // case (its other checks are UNSUPPORTED pointing here).
      return failed("refuses a case inside its declared recipes and capabilities: " + ctx.support().reason(),
                    {{"variants", nlohmann::json::array({{{"variant", "the case itself"},
                                                          {"problem", to_string(ctx.problem())},
                                                          {"reason", ctx.support().reason()}}})}});
    auto vs = variants(ctx);
    if (!ctx.support()) vs.insert(vs.begin(), Variant{"the case itself", ctx.problem(), ctx.recipe()});
    nlohmann::json fig = nlohmann::json::array();
    for (const auto& v : vs) {
      const auto st = ctx.kernel().supports(v.problem, v.recipe);
      nlohmann::json e{{"variant", v.what}, {"problem", to_string(v.problem)}, {"reason", st.reason()}};
      if (st) {
        fig.push_back(e);
        return failed("kernel claims to support " + v.what + " (" + to_string(v.problem) +
                          ") which its declared capabilities exclude",
                      {{"variants", fig}});
      }
      // Zeros of the variant's shapes: a refusal is decided by the problem, not by values, and
      // a kernel that computes instead of throwing writes its output either way (generating the
      // case's distribution for every variant was most of this check's time).
      const auto in = zero_inputs(v.problem);
      const auto li = make_inputs(v.problem, in, v.problem.layout, v.problem.pad, 0, 0);
      const std::uint32_t fill = 0x7FC0DEADu;
      auto outs = make_outputs(v.problem, v.problem.layout, v.problem.pad, 0, 0, fill, ctx.caps().lse);
      const kernels::Args args{v.problem, v.recipe, li.q, li.k, li.v, outs.out, outs.lse.empty() ? nullptr : &outs.lse, ""};
      bool threw = false;
      std::string what;
      try {
        ctx.kernel().run(args);
      } catch (const Error& ex) {
        threw = true;
        what = ex.what();
      } catch (const std::exception& ex) {
        fig.push_back(e);
        return failed("run() on refused " + v.what + " threw a non-attest exception: " + ex.what(), {{"variants", fig}});
      }
      e["run_error"] = what;
      fig.push_back(e);
      if (!threw) return failed("run() computed refused " + v.what + " (" + to_string(v.problem) + ") instead of throwing", {{"variants", fig}});
      const auto s = outs.out.storage();
      for (std::size_t i = 0; i + 4 <= s.size(); i += 4) {
        std::uint32_t w;
        std::memcpy(&w, s.data() + i, 4);
        if (w != fill) return failed("run() threw on refused " + v.what + " but wrote into the output first", {{"variants", fig}});
      }
    }
    return passed({{"variants", fig}});
  }
};

}  // namespace
std::unique_ptr<Check> make_refusal() { return std::make_unique<Refusal>(); }
}  // namespace attest::conformance::checks
