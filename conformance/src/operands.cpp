// Check `operands` (operands.hpp): a kernel's own quantized operands against the recipe's
// quantizer on the call's inputs, within the rounding bounds stated in the header.
#include "attest/conformance/operands.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "attest/core/status.hpp"
#include "attest/reference/formats.hpp"
#include "attest/reference/quantize.hpp"

namespace attest::conformance {
namespace {

using i64 = std::int64_t;
using nlohmann::json;
constexpr double kU32 = 0x1p-24;

// Unit roundoff of the dtype the kernel rounds its smoothed operand to; the absolute term is half
// the dtype's smallest subnormal spacing (fp16: 2^-24 / 2), below which u_in |x| says nothing.
double unit_roundoff(DType t) {
  switch (t) {
    case DType::f16: return 0x1p-11;
    case DType::bf16: return 0x1p-8;
    case DType::f32: return kU32;
    default: throw Error(fmt::format("operands: input dtype '{}' is not f32, f16 or bf16", dtype_name(t)));
  }
}
double subnormal_half_spacing(DType t) { return t == DType::f16 ? 0x1p-25 : 0.0; }
// Index into the scales (reference scales_shape order) of element (slab l0, l1, token t, channel c).
struct Groups {
  Scheme s;
  Shape shape;  // scales_shape of [L0, L1, T, C]
  i64 W = 0;
  i64 operator()(i64 l0, i64 l1, i64 t, i64 c) const {
    i64 a = 0, b = 0;
    switch (s.granularity) {
      case Scheme::Granularity::per_tensor: return 0;
      case Scheme::Granularity::per_block: a = t / s.block; break;
      case Scheme::Granularity::per_warp: a = t / W; break;
      case Scheme::Granularity::per_thread:
        a = t / W;
        b = s.role == Scheme::Role::q ? t % 8 : (t % 8) / 2;  // quantize.hpp per_thread groups
        break;
      case Scheme::Granularity::per_token: a = t; break;
      case Scheme::Granularity::per_channel: b = c; break;
    }
    return ((l0 * shape[1] + l1) * shape[2] + a) * shape[3] + b;
  }
};

const Scheme& scheme_of(const Recipe& r, const std::string& role) { return role == "q" ? r.q : role == "k" ? r.k : r.v; }

std::string unsupported_why(const Scheme& s) {
  if (s.family != Scheme::Family::int8 && s.family != Scheme::Family::fp8)
    return fmt::format("scheme '{}': the operands check models int8 and fp8 schemes only (MX block scales are not modelled)", to_string(s));
  if (s.rotate != Scheme::Rotation::none) return fmt::format("scheme '{}': rotated operands are not modelled", to_string(s));
  return {};
}

// The element format of a kernel's fp8 codes: its dtype names it (torch float8_e4m3fn / float8_e5m2),
// or u8 holds raw codes in the scheme's own format (FNUZ has no dtype of its own here).
FormatId fp8_format_of(DType t, const Scheme& s, const std::string& n) {
  switch (t) {
    case DType::fp8_e4m3fn: return FormatId::fp8_e4m3fn;
    case DType::fp8_e5m2: return FormatId::fp8_e5m2;
    case DType::u8: return s.element;
    default: throw Error(fmt::format("operands: {} codes are {}, expected fp8_e4m3fn, fp8_e5m2 or u8 (raw codes)", n, dtype_name(t)));
  }
}

// One ulp of |c| in the format (the subnormal spacing below the normal range).
double ulp_fmt(const FormatSpec& f, double c) {
  const int e = c == 0 ? f.emin() : std::max(f.emin(), std::ilogb(c));
  return std::ldexp(1.0, e - f.man_bits);
}
// One ulp of |x| in the input dtype (f16, bf16 or f32: unit_roundoff has refused the others).
double ulp_in(DType t, double x) {
  return ulp_fmt(format_spec(t == DType::f16 ? FormatId::fp16 : t == DType::bf16 ? FormatId::bf16 : FormatId::f32), x);
}

void require_shape(const Tensor& t, const Shape& want, const std::string& what) {
  if (t.shape() != want)
    throw Error(fmt::format("operands: {} has shape {}, expected {}", what, fmt::join(t.shape(), "x"), fmt::join(want, "x")));
}

// Judges one operand; appends its figures and, on a defect, its reason part.
void judge_one(const Recipe& r, double sm_scale, const KernelOperand& op, json& figs, std::vector<std::string>& bad) {
  const Scheme& s = scheme_of(r, op.role);
  const std::string& n = op.role;
  if (op.input.rank() != 4) throw Error(fmt::format("operands: {} input has rank {}, expected 4 [B, H, T, C]", n, op.input.rank()));
  if (op.input.dtype() != DType::f32) throw Error(fmt::format("operands: {} input values must be f32", n));
  const Shape xs = op.input.shape();
  const i64 L0 = xs[0], L1 = xs[1], T = xs[2], C = xs[3];
  const bool fp8 = s.family == Scheme::Family::fp8;
  if (!fp8 && op.codes.dtype() != DType::i8) throw Error(fmt::format("operands: {} codes are {}, expected int8", n, dtype_name(op.codes.dtype())));
  const FormatId got_fmt = fp8 ? fp8_format_of(op.codes.dtype(), s, n) : FormatId::int8;
  require_shape(op.codes, xs, n + " codes");
  if (op.scales.dtype() != DType::f32) throw Error(fmt::format("operands: {} scales are {}, expected float32", n, dtype_name(op.scales.dtype())));
  const Shape ss = ref::scales_shape(xs, s);
  if (op.scales.numel() != shape_numel(ss))
    throw Error(fmt::format("operands: {} scales hold {} values, the scheme '{}' has {} ({})", n, op.scales.numel(), to_string(s),
                            shape_numel(ss), fmt::join(ss, "x")));
  const bool smooth = s.smooth != Scheme::Smoothing::none;
  if (!op.mean.empty()) {
    if (!smooth) throw Error(fmt::format("operands: {} has a smoothing mean but scheme '{}' does not smooth", n, to_string(s)));
    if (op.mean.dtype() != DType::f32) throw Error(fmt::format("operands: {} mean must be f32 values", n));
    require_shape(op.mean, {L0, L1, 1, C}, n + " mean");
  }
  const Tensor x = op.input.contiguous(), codes = op.codes.contiguous(), scales = op.scales.contiguous();
  const float* xv = x.data<float>();
  // Code values: int8 as they are; fp8 decoded in the format the kernel used (a 256-entry table).
  const auto* cb = reinterpret_cast<const std::uint8_t*>(codes.raw());
  std::array<double, 256> lut{};
  if (fp8)
    for (int b = 0; b < 256; ++b) lut[b] = ref::decode(got_fmt, static_cast<std::uint16_t>(b));
  const auto code_value = [&](i64 i) { return fp8 ? lut[cb[i]] : static_cast<double>(static_cast<std::int8_t>(cb[i])); };
  const float* sv = scales.data<float>();
  const double u_in = unit_roundoff(op.input_dtype), a_in = subnormal_half_spacing(op.input_dtype);
  json f{{"scheme", to_string(s)}, {"input_dtype", dtype_name(op.input_dtype)}, {"elements", x.numel()}, {"groups", shape_numel(ss)}};

  // The smoothing mean: the kernel's against FP64's (per slab and channel).
  std::vector<double> mean64(static_cast<std::size_t>(L0 * L1 * C), 0.0), mean_tol(mean64.size(), 0.0);
  Tensor km;  // the mean the reference prepares with
  if (smooth) {
    km = Tensor(DType::f32, {L0, L1, 1, C});
    const Tensor given = op.mean.empty() ? Tensor() : op.mean.contiguous();
    i64 off = 0, worst_at = -1;
    double worst = 0;
#pragma omp parallel for collapse(2) schedule(static)
    for (i64 a = 0; a < L0; ++a)
      for (i64 b = 0; b < L1; ++b) {
        std::vector<double> sum(static_cast<std::size_t>(C), 0.0), sabs(static_cast<std::size_t>(C), 0.0);
        for (i64 t = 0; t < T; ++t)
          for (i64 c = 0; c < C; ++c) {
            const double v = xv[((a * L1 + b) * T + t) * C + c];
            sum[c] += v;
            sabs[c] += std::fabs(v);
          }
        for (i64 c = 0; c < C; ++c) {
          const i64 g = (a * L1 + b) * C + c;
          const double m = mean64[g] = sum[c] / static_cast<double>(T);
          const double tol = static_cast<double>(T - 1) * kU32 * sabs[c] / static_cast<double>(T) + ulp_in(op.input_dtype, std::fabs(m));
          mean_tol[g] = tol;
          if (given.empty()) {
            km.data<float>()[g] = static_cast<float>(m);
            continue;
          }
          const double got = given.data<float>()[g];
          km.data<float>()[g] = given.data<float>()[g];
          const double excess = std::fabs(got - m) / tol;
#pragma omp critical(operands_mean)
          {
            if (!(excess <= 1.0)) ++off;
            if (!(excess <= worst)) worst = std::isnan(excess) ? std::numeric_limits<double>::infinity() : excess, worst_at = g;
          }
        }
      }
    if (!given.empty()) {
      json m{{"channels", L0 * L1 * C}, {"off", off}};
      if (worst_at >= 0) {
        const i64 c = worst_at % C, b = (worst_at / C) % L1, a = worst_at / (C * L1);
        m["worst"] = {{"at", {a, b, c}}, {"got", given.data<float>()[worst_at]}, {"expected", mean64[worst_at]},
                      {"bound", mean_tol[worst_at]}, {"over_bound", worst}};
      }
      f["mean"] = m;
      if (off > 0)
        bad.push_back(fmt::format("{}: {} of {} smoothing means off (worst {:.3g}x the bound: batch {} head {} channel {}: {:.6g} "
                                  "against the FP64 mean {:.6g}, bound {:.3g})",
                                  n, off, L0 * L1 * C, worst, worst_at / (C * L1), (worst_at / C) % L1, worst_at % C,
                                  given.data<float>()[worst_at], mean64[worst_at], mean_tol[worst_at]));
    } else {
      f["mean"] = "not given: FP64's, with the mean bound added to each value's";
    }
  }

  // The reference's prepared values with that mean (smoothing, prescale), then per-group amax and
  // the largest value bound e in the group.
  ref::QuantInputs qi;
  qi.sm_scale = sm_scale;
  if (smooth) qi.mean = &km;
  const Tensor xp = ref::prepare(x, s, qi);
  const float* pv = xp.data<float>();
  const Groups grp{s, ss,
                   s.granularity == Scheme::Granularity::per_warp || s.granularity == Scheme::Granularity::per_thread
                       ? ref::sage_warp_rows(s.arch, s.role)
                       : 0};
  const bool mean_given = !op.mean.empty();
  const auto value_bound = [&](double xprime, i64 slab, i64 c) {
    double e = 2 * kU32 * std::fabs(xprime);
    if (smooth) e += u_in * std::fabs(xprime) + a_in + (mean_given ? 0.0 : mean_tol[slab * C + c]);
    return e;
  };
  const i64 G = shape_numel(ss);
  std::vector<float> amax(static_cast<std::size_t>(G), 0.0f);
  std::vector<double> emax(static_cast<std::size_t>(G), 0.0);
  i64 nonfinite = 0;
  // A per_tensor group spans every slab: one max-reduction over all elements (OpenMP combines the
  // threads' maxima); otherwise the groups lie inside one slab and the slabs run in parallel.
  if (s.granularity == Scheme::Granularity::per_tensor) {
    float am = 0.0f;
    double em = 0.0;
    const i64 elems = x.numel();
#pragma omp parallel for schedule(static) reduction(max : am, em) reduction(+ : nonfinite)
    for (i64 i = 0; i < elems; ++i) {
      const float v = pv[i];
      if (!std::isfinite(v)) {
        ++nonfinite;
        continue;
      }
      am = std::max(am, std::fabs(v));
      em = std::max(em, value_bound(v, i / (T * C), i % C));
    }
    amax[0] = am;
    emax[0] = em;
  } else {
#pragma omp parallel for collapse(2) schedule(static) reduction(+ : nonfinite)
    for (i64 a = 0; a < L0; ++a)
      for (i64 b = 0; b < L1; ++b)
        for (i64 t = 0; t < T; ++t)
          for (i64 c = 0; c < C; ++c) {
            const i64 i = ((a * L1 + b) * T + t) * C + c;
            const float v = pv[i];
            if (!std::isfinite(v)) {
              ++nonfinite;
              continue;
            }
            const i64 g = grp(a, b, t, c);
            amax[g] = std::max(amax[g], std::fabs(v));
            emax[g] = std::max(emax[g], value_bound(v, a * L1 + b, c));
          }
  }
  f["nonfinite_inputs"] = nonfinite;
  if (nonfinite > 0) f["nonfinite_note"] = "non-finite prepared values are skipped (the nonfinite check judges them)";

  // Scales.
  const double M = s.scale_max;
  // The scale the group's amax gives under the scheme's rule, and the bound around it.
  const auto scale_want = [&](i64 g) { return static_cast<double>(ref::uniform_scale(amax[g], s.scale, s.scale_max)); };
  const auto scale_tol = [&](i64 g) { return emax[g] / M + 4 * kU32 * std::fabs(scale_want(g)); };
  i64 s_off = 0, s_worst_at = -1;
  double s_worst = 0;
  for (i64 g = 0; g < G; ++g) {
    const double want = scale_want(g), tol = scale_tol(g);
    const double got = sv[g];
    const double excess = std::fabs(got - want) / std::max(tol, std::numeric_limits<double>::min());
    const bool ok = excess <= 1.0;
    if (!ok) ++s_off;
    if (!(excess <= s_worst)) s_worst = std::isnan(excess) ? std::numeric_limits<double>::infinity() : excess, s_worst_at = g;
  }
  json sj{{"groups", G}, {"off", s_off}};
  if (s_worst_at >= 0) {
    const i64 g = s_worst_at;
    const double want = scale_want(g);
    std::vector<i64> at{g / (ss[1] * ss[2] * ss[3]), (g / (ss[2] * ss[3])) % ss[1], (g / ss[3]) % ss[2], g % ss[3]};
    sj["worst"] = {{"at", at}, {"got", sv[g]}, {"expected", want}, {"ratio", want != 0 ? sv[g] / want : 0.0},
                   {"bound", scale_tol(g)}, {"over_bound", s_worst}};
    if (s_off > 0)
      bad.push_back(fmt::format("{}: {} of {} scales off (worst: group [{}] of shape {}: {:.6g} where the group's amax gives {:.6g}, "
                                "x{:.4g}, bound +-{:.3g})",
                                n, s_off, G, fmt::join(at, ","), fmt::join(ss, "x"), sv[g], want, want != 0 ? sv[g] / want : 0.0,
                                scale_tol(g)));
  }
  f["scales"] = sj;

  // Codes, each against the prepared value divided by the kernel's own scale of its group. A
  // kernel's fp8 codes in another format than the scheme's are the finding (a different grid:
  // their values are not judged against this one).
  if (fp8 && got_fmt != s.element) {
    bad.push_back(fmt::format("{}: codes are {} where the scheme '{}' makes {}", n, ref::format_name(got_fmt), to_string(s),
                              ref::format_name(s.element)));
    f["codes"] = {{"elements", x.numel()}, {"format", ref::format_name(got_fmt)}, {"expected_format", ref::format_name(s.element)},
                  {"judged", false}};
    figs[n] = f;
    return;
  }
  const FormatSpec& fs = format_spec(fp8 ? s.element : FormatId::int8);
  // int8: the code within 0.5 of the clamped quotient; fp8: within half a grid step at the code,
  // the quotient clamped to the format's finite range (every modelled fp8 overflow saturates
  // there or gives a NaN code, which is off).
  const double lo = fp8 ? -fs.max_finite : s.int_round == Scheme::IntRounding::rne ? -128.0 : -127.0;
  const double hi = fp8 ? fs.max_finite : 127.0;
  i64 c_off = 0, c_worst_at = -1;
  double c_worst = 0;
#pragma omp parallel
  {
    i64 off_l = 0, at_l = -1;
    double worst_l = 0;
#pragma omp for collapse(2) schedule(static)
    for (i64 a = 0; a < L0; ++a)
      for (i64 b = 0; b < L1; ++b)
        for (i64 t = 0; t < T; ++t)
          for (i64 c = 0; c < C; ++c) {
            const i64 i = ((a * L1 + b) * T + t) * C + c;
            const double v = pv[i], sc = sv[grp(a, b, t, c)];
            if (!std::isfinite(v) || !(sc > 0) || !std::isfinite(sc)) continue;  // a bad scale is the scales' finding
            const double y = std::clamp(v / sc, lo, hi), cval = code_value(i);
            const double half = fp8 ? 0.5 * ulp_fmt(fs, std::fabs(cval)) : 0.5;
            const double tol = half + (value_bound(v, a * L1 + b, c) + 4 * kU32 * std::fabs(v)) / sc;
            double excess = std::fabs(cval - y) / tol;
            if (std::isnan(excess)) excess = std::numeric_limits<double>::infinity();  // a NaN code
            if (excess > 1.0) ++off_l;
            if (excess > worst_l) worst_l = excess, at_l = i;
          }
#pragma omp critical(operands_codes)
    {
      c_off += off_l;
      if (worst_l > c_worst) c_worst = worst_l, c_worst_at = at_l;
    }
  }
  json cj{{"elements", x.numel()}, {"off", c_off}};
  if (c_worst_at >= 0) {
    const i64 i = c_worst_at, c = i % C, t = (i / C) % T, b = (i / (C * T)) % L1, a = i / (C * T * L1);
    const double sc = sv[grp(a, b, t, c)];
    cj["worst"] = {{"at", {a, b, t, c}}, {"got", code_value(i)}, {"expected", pv[i] / sc}, {"over_bound", c_worst}};
    if (fp8) cj["worst"]["code"] = cb[i];
    if (c_off > 0)
      bad.push_back(fmt::format("{}: {} of {} codes off (worst: batch {} head {} token {} channel {}: code {}{} where value / scale = {:.6g})",
                                n, c_off, x.numel(), a, b, t, c, code_value(i), fp8 ? fmt::format(" (0x{:02x})", cb[i]) : "",
                                pv[i] / sc));
  }
  f["codes"] = cj;
  figs[n] = f;
}

}  // namespace

Outcome judge_operands(const Recipe& recipe, double sm_scale, const std::vector<KernelOperand>& ops) {
  if (ops.empty()) throw Error("operands: no operand given");
  for (const auto& op : ops) {
    if (op.role != "q" && op.role != "k" && op.role != "v") throw Error(fmt::format("operands: role '{}' is not q, k or v", op.role));
    if (auto why = unsupported_why(scheme_of(recipe, op.role)); !why.empty()) return {Verdict::unsupported, op.role + ": " + why, json::object()};
  }
  json figs = json::object();
  std::vector<std::string> bad;
  for (const auto& op : ops) judge_one(recipe, sm_scale, op, figs, bad);
  std::string roles;
  for (const auto& op : ops) roles += (roles.empty() ? "" : ", ") + op.role;
  figs["bounds"] = "operands.hpp: mean (T-1) u mean|k| + ulp_in; value u_in |x'| (smoothed) + 2u |x'|; scale e/M + 4u S; code h + e/s (int8 h 0.5, fp8 half a grid step)";
  if (!bad.empty()) return {Verdict::failed, fmt::format("{}", fmt::join(bad, "; ")), figs};
  return {Verdict::passed, fmt::format("{}: every mean, scale and code within its rounding bound of the recipe's quantizer", roles), figs};
}

}  // namespace attest::conformance
