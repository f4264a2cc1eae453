// subnormal: V scaled by 2^-130 puts the accumulator and the output in the float32 (and bf16)
// subnormal range. The emulator keeps IEEE subnormals, so a kernel that flushes them to zero
// (FTZ/DAZ modes, fast-math) breaks its bitwise contract; a kernel without one must still meet
// the accuracy rule (a flushed output is 100% off). No fill produces subnormal outputs, hence a
// check of its own.
#include <cmath>

#include "attest/conformance/accuracy.hpp"
#include "common.hpp"

namespace attest::conformance::checks {
namespace {

class Subnormal final : public Check {
 public:
  // Applies by recipe (a V format that flushes 2^-130 itself leaves nothing to test), not by a
  // kernel declaration: no coverage claim.
  bool declared_by(const kernels::Kernel&) const override { return false; }
  std::string_view name() const override { return "subnormal"; }
  std::string_view summary() const override { return "V scaled by 2^-130: subnormal outputs kept, not flushed"; }
  Outcome run(Context& ctx) const override {
    const Problem& p = ctx.problem();
    const auto& base = ctx.inputs();
    datasets::Qkv in{base.q, base.k, base.v.contiguous()};
    float* v = in.v.data<float>();
    for (std::int64_t i = 0; i < in.v.numel(); ++i) v[i] = std::ldexp(v[i], -130);
    const auto k = ctx.run(p, in);
    const auto emu = ctx.emulate(p, in.q, in.k, in.v);
    nlohmann::json fig;
    const auto ce = metrics::compare(emu.out, emu.out, 0);
    // fp16 and unscaled FP8/FP4 V formats round 2^-130-scaled values to zero themselves: the
    // recipe never reaches a subnormal accumulator.
    if (ce.norm_ref == 0) return unsupported("the recipe's V format flushes 2^-130-scaled values itself: no subnormal accumulator to test");
    std::int64_t flushed = 0, nonzero = 0;
    {
      const auto a = k.out.view<float, 4>(), e = emu.out.view<float, 4>();
      for (std::int64_t b = 0; b < a.shape[0]; ++b)
        for (std::int64_t s = 0; s < a.shape[1]; ++s)
          for (std::int64_t h = 0; h < a.shape[2]; ++h)
            for (std::int64_t d = 0; d < a.shape[3]; ++d) {
              const float x = e(b, s, h, d);
              nonzero += x != 0 && std::isfinite(x);
              flushed += x != 0 && std::isfinite(x) && a(b, s, h, d) == 0;
            }
    }
    fig["scale"] = "2^-130";
    fig["nonzero_emulated"] = nonzero;
    fig["flushed_to_zero"] = flushed;
    if (ctx.caps().bitwise && ctx.recipe().bitwise_capable()) {
      auto d = bit_diff(k.out, emu.out, "out", fig);
      if (!d.empty())
        return failed(fmt::format("{} of {} subnormal-range outputs flushed to zero; {}", flushed, nonzero, d), fig);
      return passed(fig);
    }
    const auto ref = ctx.tolerances().lookup(ctx.recipe_label(), "accuracy");
    const auto ref64 = [&] {
      try {
        return ref::attention(p, in.q, in.k, in.v, ref::Precision::fp64);
      } catch (const std::exception& e) {
        throw VerdictError(Verdict::error, std::string("FP64 reference: ") + e.what());
      }
    }();
    const auto rev = ctx.emulate(p, in.q, in.k, in.v, true);
    const auto m = metrics::compare(k.out, ref64.out), b = metrics::compare(emu.out, ref64.out),
               f = output_floor(emu, rev);
    const auto j = judge(ref, metric_set(m, nullptr), metric_set(b, nullptr), metric_set(f, nullptr));
    fig["judgement"] = j.figures;
    if (!j.pass) return failed(fmt::format("{} of {} subnormal-range outputs flushed; {}", flushed, nonzero, j.reason), fig);
    return passed(fig);
  }
};

}  // namespace
std::unique_ptr<Check> make_subnormal() { return std::make_unique<Subnormal>(); }
}  // namespace attest::conformance::checks
