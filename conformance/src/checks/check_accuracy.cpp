// accuracy: error against the FP64 reference inside the recipe's noise floor (DESIGN.md):
//   metric(K, ref64) <= alpha * metric(emu, ref64) + beta * metric(emu_rev, emu) + eps
// for every metric the tolerance row bounds (out and lse), after the trust checks.
// The per-block figures (worst 64-row block of each head, the engine's reduction, engine.hpp)
// come with every verdict; the verdict itself is the rule above on every row.
#include "attest/conformance/accuracy.hpp"
#include "attest/conformance/engine.hpp"
#include "common.hpp"

namespace attest::conformance::checks {

std::unique_ptr<Check> make_accuracy() {
  return make_check("accuracy", "error vs FP64 within alpha*budget + beta*floor + eps (out, lse)",
                    [](const Check& self, Context& ctx) {
                      const auto& k = ctx.baseline();
                      std::string why;
                      if (auto d = device_verdict(ctx, "accuracy", ctx.inputs(), k, why)) return std::move(*d);
                      auto o = judge_accuracy(ctx.tolerances().lookup(ctx.recipe_label(), self.name()), k.out, k.lse,
                                              ctx.ref64(), ctx.emu(), ctx.emu_rev());
                      o.figures["blocks"] = engine::block_figures(engine::ref_of(k.out), engine::ref_of(ctx.ref64().out), 64);
                      return host_judged(ctx, std::move(o), why);
                    });
}

std::optional<Outcome> device_verdict(const Context& ctx, const std::string& check, const datasets::Qkv& in,
                                      const KernelOutput& k, std::string& why, double flush_below) {
  if (!ctx.options().device_oracles) return std::nullopt;
  if (!k.lse.empty()) {
    why = "the kernel returns an LSE: the device engine judges out only, so the whole case is judged on the host";
    return std::nullopt;
  }
  const Problem& p = ctx.problem();
  engine::SampleArgs sa;
  sa.max_macs = ctx.options().device_sample_macs;
  sa.threads = ctx.options().device_threads;
  // The problem's mask is explicit (the bridge called the kernel with it): its convention is the
  // mask's own, so a causal cross problem is planned as the mask it names.
  sa.causal = p.mask == Mask::causal_br ? "bottom_right" : "top_left";
  Case c = ctx.the_case();
  c.check = check;
  try {
    return engine::judge_on_device(c, check, in.q, in.k, in.v, k.out, ctx.tolerances(), sa, why, flush_below);
  } catch (const VerdictError&) {
    throw;
  } catch (const std::exception& e) {
    throw VerdictError(Verdict::error, std::string("device engine: ") + e.what());
  }
}

}  // namespace attest::conformance::checks

namespace attest::conformance {

metrics::Comparison output_floor(const ref::EmulatorOutput& emu, const ref::EmulatorOutput& twin) {
  return metrics::compare(twin.out_unrounded, emu.out_unrounded);
}

// Also `attest check --capture`'s judgement (accuracy.hpp): one comparator for both.
Outcome judge_accuracy(const ToleranceRow& row, const Tensor& k_out, const Tensor& k_lse, const ref::AttentionOutput& ref,
                       const ref::EmulatorOutput& emu, const ref::EmulatorOutput& rev) {
  using checks::failed;
  using checks::mistrusted;
  using checks::passed;
  const bool lse = !k_lse.empty();

  const auto m_out = metrics::compare(k_out, ref.out);
  const auto b_out = metrics::compare(emu.out, ref.out);
  // The floor is measured before the output rounding (docs/gate.md "The accuracy rule"): the
  // rounded pair differs mostly by one-ulp flips of the output format, a rounding the budget
  // already holds once. `round_out` is that rounding alone, reported for the record.
  const auto f_out = output_floor(emu, rev);
  const auto f_rounded = metrics::compare(rev.out, emu.out);
  const auto r_out = metrics::compare(emu.out, emu.out_unrounded);
  std::optional<metrics::Comparison> m_lse, b_lse, f_lse;
  if (lse) {
    m_lse = metrics::compare(k_lse, ref.lse);
    b_lse = metrics::compare(emu.lse, ref.lse);
    f_lse = metrics::compare(rev.lse, emu.lse);
  }
  auto measured = metric_set(m_out, lse ? &*m_lse : nullptr);
  const auto budget = metric_set(b_out, lse ? &*b_lse : nullptr);
  const auto floor = metric_set(f_out, lse ? &*f_lse : nullptr);
  if (row.bad_fraction) measured["bad_fraction"] = bad_fraction(k_out, ref.out, *row.bad_fraction);

  nlohmann::json fig;
  nlohmann::json jm, jb, jf;
  metrics::to_json(jm, m_out);
  metrics::to_json(jb, b_out);
  metrics::to_json(jf, f_out);
  nlohmann::json jfr, jr;
  metrics::to_json(jfr, f_rounded);
  metrics::to_json(jr, r_out);
  fig["out"] = {{"measured", jm}, {"budget", jb}, {"floor", jf}, {"floor_rounded", jfr}, {"output_rounding", jr}};
  if (lse) {
    metrics::to_json(jm, *m_lse);
    metrics::to_json(jb, *b_lse);
    metrics::to_json(jf, *f_lse);
    fig["lse"] = {{"measured", jm}, {"budget", jb}, {"floor", jf}};
  }

  // Trust before value: a reference of norm 0 detects nothing; a degenerate kernel output
  // (all zero, or NaN/Inf the reference does not have) is not a measurement.
  if (m_out.norm_ref == 0) return mistrusted("FP64 reference output has norm 0: this fill detects nothing", fig);
  if (m_out.nonfinite_mismatches > 0 || (lse && m_lse->nonfinite_mismatches > 0))
    return mistrusted(fmt::format("unexpected NaN/Inf: out {} NaN {} Inf (reference {} / {}){}", m_out.nan_test,
                                  m_out.inf_test, m_out.nan_ref, m_out.inf_ref,
                                  lse ? fmt::format(", lse {} non-finite mismatches", m_lse->nonfinite_mismatches) : ""),
                      fig);
  if (m_out.norm_test == 0) return mistrusted("kernel output is all zero while the reference is not", fig);

  auto j = judge(row, measured, budget, floor);
  fig["judgement"] = j.figures;
  if (!j.pass) return failed(j.reason, fig);
  return passed(fig);
}

}  // namespace attest::conformance
