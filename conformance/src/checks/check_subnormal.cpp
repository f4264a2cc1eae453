// subnormal: V scaled by 2^-130 puts the accumulator and the output in the float32 (and bf16)
// subnormal range. The emulator keeps IEEE subnormals, so a kernel that flushes them to zero
// (FTZ/DAZ modes, fast-math) breaks its bitwise contract; a kernel without one must still meet
// the accuracy rule (a flushed output is 100% off). No fill produces subnormal outputs, hence a
// check of its own.
//
// A kernel that declares ftz is judged against references flushed the same way: on the host
// (judge_ftz) by the element rule against the whole emulator output; with device oracles (and
// no bitwise contract) by the device engine with JudgeRequest::flush_below = 2^-126, because the
// host emulator and FP64 reference of every row made a long case file take minutes.
#include <cmath>

#include "attest/conformance/accuracy.hpp"
#include "attest/conformance/engine.hpp"
#include "common.hpp"

namespace attest::conformance::checks {
namespace {

constexpr double kFltMin = 1.17549435082228750797e-38;  // 2^-126: below it a float32 is subnormal

// A contiguous copy of a float32/float64 tensor with every |x| < 2^-126 set to zero (sign kept):
// what a flush-to-zero kernel writes.
Tensor flushed(const Tensor& t) {
  Tensor c = t.contiguous();
  if (c.dtype() == DType::f64) {
    double* x = c.data<double>();
    for (std::int64_t i = 0; i < c.numel(); ++i)
      if (std::fabs(x[i]) < kFltMin) x[i] = std::copysign(0.0, x[i]);
  } else {
    float* x = c.data<float>();
    for (std::int64_t i = 0; i < c.numel(); ++i)
      if (std::fabs(x[i]) < kFltMin) x[i] = std::copysign(0.0f, x[i]);
  }
  return c;
}

ref::EmulatorOutput flushed(const ref::EmulatorOutput& e) {
  ref::EmulatorOutput f = e;
  f.out = flushed(e.out);
  if (!e.out_unrounded.empty()) f.out_unrounded = flushed(e.out_unrounded);
  return f;
}

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
    std::string why;
    if (!(ctx.caps().bitwise && ctx.recipe().bitwise_capable()))
      if (auto o = on_device(ctx, in, k, why)) return std::move(*o);
    const auto emu = ctx.emulate(p, in.q, in.k, in.v);
    nlohmann::json fig;
    if (ctx.options().device_oracles) fig["oracles"] = "host", fig["oracles_why"] = why;
    const auto ce = metrics::compare(emu.out, emu.out, 0);
    // fp16 and unscaled FP8/FP4 V formats round 2^-130-scaled values to zero themselves: the
    // recipe never reaches a subnormal accumulator.
    if (ce.norm_ref == 0) return unsupported("the recipe's V format flushes 2^-130-scaled values itself: no subnormal accumulator to test");
    std::int64_t flushed = 0, nonzero = 0;  // over emulated outputs that are not zero
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
    // A kernel that declares ftz (Capabilities::ftz) and flushed: judged against the references
    // with their subnormal-range outputs flushed the same way, and the declaration reported.
    if (ctx.caps().ftz && flushed > 0) return judge_ftz(ctx, in, k, emu, flushed, nonzero, fig);
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

 private:
  // Device oracles (CheckOptions::device_oracles), for a kernel without a bitwise contract (its
  // rule needs the emulator's every element: host): the accuracy rule on the scaled inputs by the
  // device engine, where a flushed output is 100% off. A kernel that declares ftz and has outputs
  // zero where FP64 is not is judged again against flushed references
  // (engine::JudgeRequest::flush_below); one that did not flush keeps the plain verdict (the host's
  // judge_ftz likewise applies only to a kernel that flushed). Its counts are against FP64, not
  // the emulator (the emulator runs on the planned blocks only). Whether the V format keeps
  // 2^-130-scaled values at all is asked of the emulator on one head's first rows, a sub-problem
  // of its own: for a cast recipe those rows are the whole problem's; a quantized one's scales
  // there may differ from the whole problem's, but whether a scaled V survives its format does
  // not depend on which rows set a scale, so the answer holds for every row.
  static std::optional<Outcome> on_device(Context& ctx, const datasets::Qkv& in, const KernelOutput& k, std::string& why) {
    if (!ctx.options().device_oracles) return std::nullopt;
    const Problem& p = ctx.problem();
    if (!p.ragged() && p.seqlen_q > 0 && p.seqlen_kv > 0 && engine::recipe_refusal(ctx.recipe()).empty()) {
      Problem pp = p;
      pp.batch = 1;
      pp.heads_q = pp.heads_kv = 1;
      pp.seqlen_q = std::min<std::int64_t>(p.seqlen_q, 8);
      pp.mask = Mask::none;
      pp.softmax_scale = p.scale();
      const std::int64_t lo[4] = {0, 0, 0, 0}, hq[4] = {1, pp.seqlen_q, 1, p.head_dim},
                         hk[4] = {1, p.seqlen_kv, 1, p.head_dim}, hv[4] = {1, p.seqlen_kv, 1, p.head_dim_v};
      const auto probe = ctx.emulate(pp, engine::gather(engine::ref_of(in.q), lo, hq), engine::gather(engine::ref_of(in.k), lo, hk),
                                     engine::gather(engine::ref_of(in.v), lo, hv));
      if (metrics::compare(probe.out, probe.out, 0).norm_ref == 0)
        return unsupported("the recipe's V format flushes 2^-130-scaled values itself: no subnormal accumulator to test");
    }
    // Judged as without the declaration first: a kernel that keeps subnormals (no output zero
    // where FP64 is not; the count is taken before any flush, so it is the same in both modes)
    // is decided by that one device judgement, declaration or not.
    std::optional<Outcome> o = device_verdict(ctx, "accuracy", in, k, why);
    if (!o) return o;
    const nlohmann::json::json_pointer at("/blocks/whole");
    const auto whole_of = [&](const Outcome& x) { return x.figures.contains(at) ? x.figures.at(at) : nlohmann::json::object(); };
    if (ctx.caps().ftz && whole_of(*o).value("zero_where_ref_nonzero", std::int64_t{0}) > 0) {
      o = device_verdict(ctx, "accuracy", in, k, why, kFltMin);
      if (!o) return o;
      const nlohmann::json whole = whole_of(*o);
      const std::int64_t flushed_n = whole.value("zero_where_ref_nonzero", std::int64_t{0}),
                         nonzero = whole.value("ref_nonzero", std::int64_t{0});
      o->figures["scale"] = "2^-130";
      o->figures["declared"] = "ftz";
      o->figures["flushed_to_zero"] = flushed_n;
      o->figures["nonzero_reference"] = nonzero;
      o->figures["counted_against"] = "FP64 reference";
      const std::string declared = fmt::format("ftz declared: {} of {} subnormal-range outputs flushed", flushed_n, nonzero);
      if (o->verdict == Verdict::passed) {
        o->reason = declared;
      } else if (o->verdict == Verdict::failed) {
        o->reason = "V scaled by 2^-130 (subnormal-range outputs): " +
                    (o->reason.rfind("ftz declared", 0) == 0 ? o->reason
                                                             : declared + "; against flushed references: " + o->reason);
      }
      return o;
    }
    o->figures["scale"] = "2^-130";
    if (o->verdict == Verdict::failed) o->reason = "V scaled by 2^-130 (subnormal-range outputs): " + o->reason;
    return o;
  }

  static Outcome judge_ftz(Context& ctx, const datasets::Qkv& in, const KernelOutput& k, const ref::EmulatorOutput& emu,
                           std::int64_t flushed_n, std::int64_t nonzero, nlohmann::json& fig) {
    const Problem& p = ctx.problem();
    fig["declared"] = "ftz";
    const std::string declared = fmt::format("ftz declared: {} of {} subnormal-range outputs flushed", flushed_n, nonzero);
    const Tensor ef = flushed(emu.out);
    // Element rule: a subnormal-range output may be flushed (either zero) or kept; a normal one
    // is not flushed beyond what flushing can remove: a kernel that flushes does so in its inputs,
    // products and partial sums too, each of a row's T keys losing less than 2^-126, so a zero
    // stands for at most 2 (T + 1) 2^-126 (the device engine's rule, engine.hpp flush_below).
    // Bitwise kernels must otherwise give the emulator's bits.
    const bool bitwise = ctx.caps().bitwise && ctx.recipe().bitwise_capable();
    const double zero_bound = 2.0 * static_cast<double>(p.seqlen_kv + 1) * kFltMin;
    std::int64_t bad = 0, normal = 0;
    std::string first;
    {
      const auto a = k.out.view<float, 4>(), e = emu.out.view<float, 4>();
      for (std::int64_t b = 0; b < a.shape[0]; ++b)
        for (std::int64_t s = 0; s < a.shape[1]; ++s)
          for (std::int64_t h = 0; h < a.shape[2]; ++h)
            for (std::int64_t d = 0; d < a.shape[3]; ++d) {
              const float x = a(b, s, h, d), y = e(b, s, h, d);
              const bool sub = std::fabs(y) < kFltMin;
              normal += !sub && y != 0;
              const bool ok = sub ? (x == 0 || (bitwise ? bits_of(x) == bits_of(y) : std::fabs(x) <= kFltMin))
                                  : (bitwise ? bits_of(x) == bits_of(y) : x != 0 || std::fabs(y) < zero_bound);
              if (!ok && bad++ == 0)
                first = fmt::format("[{}, {}, {}, {}]: {:.9g} vs emulated {:.9g}", b, s, h, d, x, y);
            }
    }
    fig["normal_range_emulated"] = normal;
    if (bad > 0)
      return failed(fmt::format("ftz declared, yet {} outputs are neither the emulator's nor a flushed subnormal; first at {}",
                                bad, first),
                    fig);
    if (bitwise || normal == 0) return passed(fig, declared);
    // Normal-range outputs besides: the accuracy rule against flushed references.
    const auto ref = ctx.tolerances().lookup(ctx.recipe_label(), "accuracy");
    ref::AttentionOutput ref64;
    try {
      ref64 = ref::attention(p, in.q, in.k, in.v, ref::Precision::fp64);
    } catch (const std::exception& e) {
      throw VerdictError(Verdict::error, std::string("FP64 reference: ") + e.what());
    }
    const Tensor rf = flushed(ref64.out);
    const auto emu_f = flushed(emu);
    const auto rev_f = flushed(ctx.emulate(p, in.q, in.k, in.v, true));
    const auto m = metrics::compare(k.out, rf), b = metrics::compare(ef, rf), f = output_floor(emu_f, rev_f);
    const auto j = judge(ref, metric_set(m, nullptr), metric_set(b, nullptr), metric_set(f, nullptr));
    fig["judgement"] = j.figures;
    if (!j.pass) return failed(fmt::format("{}; against flushed references: {}", declared, j.reason), fig);
    return passed(fig, declared);
  }
};

}  // namespace
std::unique_ptr<Check> make_subnormal() { return std::make_unique<Subnormal>(); }
}  // namespace attest::conformance::checks
