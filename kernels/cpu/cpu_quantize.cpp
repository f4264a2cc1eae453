#include "cpu/cpu_quantize.hpp"

#include <bit>
#include <cmath>
#include <limits>
#include <string>

#include "attest/core/status.hpp"

namespace attest::kernels::cpu {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// NaN-propagating running absolute maximum (torch.amax semantics).
void amax_into(float& amax, float v) {
  const float a = std::fabs(v);
  if (std::isnan(a) || a > amax) amax = a;
}

int emax_of(const Scheme& s) {
  if (is_mx_int8(s)) return 0;
  // MX emax: exponent of the largest finite value.
  return std::ilogb(format_spec(s.element).max_finite);
}

// Sylvester-Hadamard rotations (docs/quantizer-schemes.md): the 128-point transform as butterfly
// stages of span 1, 2, ..., 64 in that order (each stage rounds every element once; pairs inside
// a stage are independent), or per 32-channel block a bf16 matrix product summed in index order.
void rotate(float* x, std::int64_t C, Scheme::Rotation kind, float mult) {
  constexpr float kNorm128 = 0.08838834764831845f;
  if (kind == Scheme::Rotation::h32_bf16) {
    constexpr float kH32 = 0.1767578125f;  // bf16(1/sqrt(32))
    for (std::int64_t base = 0; base < C; base += 32) {
      float in[32];
      for (int j = 0; j < 32; ++j) in[j] = to_bf16(x[base + j]);
      for (int k = 0; k < 32; ++k) {
        float sum = 0.0f;
        for (int j = 0; j < 32; ++j) sum = sum + in[j] * ((std::popcount(static_cast<unsigned>(j & k)) % 2) != 0 ? -kH32 : kH32);
        x[base + k] = sum;
      }
    }
    return;
  }
  for (int span = 1; span < 128; span <<= 1)
    for (int i = 0; i < 128; ++i) {
      if ((i & span) != 0) continue;
      const float lo = x[i], hi = x[i | span];
      x[i] = lo + hi;
      x[i | span] = lo - hi;
    }
  for (int i = 0; i < 128; ++i) {
    x[i] = x[i] * kNorm128;
    if (kind == Scheme::Rotation::h128_bf16) x[i] = to_bf16(x[i] * mult);
  }
}

}  // namespace

std::uint8_t e8m0_code(float amax, const Scheme& s) {
  if (!std::isfinite(amax)) return 0xFF;
  const float a = std::fabs(amax);
  const int e = exp_field(a);
  const std::uint32_t m = man_field(a);
  auto clampi = [](int v, int lo, int hi) { return std::min(std::max(v, lo), hi); };
  using E8 = Scheme::E8M0Rule;
  switch (s.e8m0) {
    case E8::floor: return static_cast<std::uint8_t>(clampi(e - 127 - emax_of(s), -127, 127) + 127);
    case E8::ceil: return static_cast<std::uint8_t>(clampi(e - 127 + (m != 0) - emax_of(s), -127, 127) + 127);
    case E8::rceil: {
      const float emax_val = is_mx_int8(s) ? 127.0f / 64.0f : static_cast<float>(format_spec(s.element).max_finite);
      const float d = a * (1.0f / emax_val);
      if (!std::isfinite(d)) return 0xFF;
      const int ed = exp_field(d);
      const int code = ed == 0 ? (man_field(d) > 0x400000u ? 1 : 0) : ed + (man_field(d) != 0);
      return static_cast<std::uint8_t>(std::min(code, 254));
    }
    case E8::aiter_hip_fp4: return static_cast<std::uint8_t>(((bits_of(a / 6.0f) + 0x7FFFFFu) & 0x7F800000u) >> 23);
    case E8::aiter_triton_v_fp4: {
      const float b = a < 1e-12f ? 1e-12f : a;
      return static_cast<std::uint8_t>(exp_field(b) - 2 + (man_field(b) > 0x400000u));
    }
    case E8::aiter_triton_rne: {
      const bool up = m > 0x400000u || (m == 0x400000u && (e % 2) == 1);
      return static_cast<std::uint8_t>(clampi(e + up - 2, 0, 254));
    }
    case E8::aiter_hip_fp8: {
      const int c = static_cast<int>(((bits_of(a) + 0x200000u) & 0x7F800000u) >> 23) - 8;
      return static_cast<std::uint8_t>(c < 0 ? 0 : c == 255 ? 254 : c);
    }
    case E8::aiter_hip_fp6: return a == 0.0f ? 127 : static_cast<std::uint8_t>((e - 2) & 0xFF);
  }
  throw Error("scheme " + scheme_head(s) + ": unknown E8M0 rule " + std::to_string(static_cast<int>(s.e8m0)));
}

float e8m0_multiplier(std::uint8_t code, const Scheme& s) {
  if (code == 0xFF) return kNaN;
  if (s.e8m0 == Scheme::E8M0Rule::aiter_hip_fp8) return from_bits(static_cast<std::uint32_t>(254 - code) << 23);
  return static_cast<float>(std::ldexp(1.0, 127 - static_cast<int>(code)));
}

float mx_element(float v, const Scheme& s) {
  if (!is_mx_int8(s)) return round_to(format_spec(s.element), v, s.elem_round, s.overflow);
  // MXINT8: v * 64 rounded to an integer in [-127, 127] (NaN -> 0), value / 64.
  const float w = v * 64.0f;
  float n = 0;
  if (!std::isnan(w)) {
    const double u = static_cast<double>(w);
    n = static_cast<float>(s.elem_round == Rounding::rne ? std::nearbyint(u) : s.elem_round == Rounding::away ? std::floor(std::fabs(u) + 0.5) * (u < 0 ? -1 : 1)
                                                                                       : std::ceil(std::fabs(u) - 0.5) * (u < 0 ? -1 : 1));
    n = std::min(std::max(n, -127.0f), 127.0f);
  }
  return n / 64.0f;
}

QOperand quantize_operand(const std::vector<float>& x, std::int64_t slabs, std::int64_t T, std::int64_t C,
                          const Scheme& s, bool as_v, double sm_scale, const QuantBugs& bugs) {
  QOperand o;
  o.slabs = slabs, o.T = T, o.C = C;
  o.val = x;
  o.ts.assign(static_cast<std::size_t>(slabs * T), 1.0f);
  o.cs.assign(static_cast<std::size_t>(slabs * C), 1.0f);
  auto w = [&](std::int64_t sl, std::int64_t t, std::int64_t c) -> float& {
    return o.val[static_cast<std::size_t>((sl * T + t) * C + c)];
  };
  if (s.family == Scheme::Family::identity) return o;
  if (s.family == Scheme::Family::cast) {
    for (float& v : o.val) v = round_to(format_spec(s.element), v, s.elem_round, s.overflow);
    return o;
  }
  // 1. smoothing: subtract the per-channel mean over tokens (double sum in token order).
  if (s.smooth != Scheme::Smoothing::none) {
    o.km.assign(static_cast<std::size_t>(slabs * C), 0.0f);
    for (std::int64_t sl = 0; sl < slabs; ++sl)
      for (std::int64_t c = 0; c < C; ++c) {
        double sum = 0;
        for (std::int64_t t = 0; t < T; ++t) sum += w(sl, t, c);
        float km = T > 0 ? static_cast<float>(sum / static_cast<double>(T)) : 0.0f;
        if (s.smooth == Scheme::Smoothing::bf16) km = to_bf16(km);
        o.km[static_cast<std::size_t>(sl * C + c)] = km;
      }
    for (std::int64_t sl = 0; sl < slabs; ++sl)
      for (std::int64_t t = 0; t < T; ++t) {
        float tok_mean = 0;
        if (bugs.smooth_per_token) {
          double sum = 0;
          for (std::int64_t c = 0; c < C; ++c) sum += w(sl, t, c);
          tok_mean = static_cast<float>(sum / static_cast<double>(C));
        }
        for (std::int64_t c = 0; c < C; ++c) {
          const float km = bugs.smooth_per_token ? tok_mean : o.km[static_cast<std::size_t>(sl * C + c)];
          const float d = w(sl, t, c) - km;
          w(sl, t, c) = s.smooth == Scheme::Smoothing::bf16 ? to_bf16(d) : d;
        }
      }
  }
  // 2. Rotation of each token's channels, 3. Q prescale by fl32(sm_scale * 1.44269504) (the
  // h128_bf16 rotation consumes it).
  const auto factor = static_cast<float>(sm_scale * 1.44269504);
  const bool prescale = s.prescale == Scheme::Prescale::sm_log2e;
  using Rt = Scheme::Rotation;
  if (s.rotate != Rt::none) {
    if ((s.rotate == Rt::h128 || s.rotate == Rt::h128_bf16) && C != 128)
      throw Error("scheme " + scheme_head(s) + ": the 128-channel Hadamard rotation needs head_dim 128");
    if (s.rotate == Rt::h32_bf16 && C % 32 != 0) throw Error("scheme " + scheme_head(s) + ": h32_bf16 needs head_dim % 32 == 0");
    for (std::int64_t sl = 0; sl < slabs; ++sl)
      for (std::int64_t t = 0; t < T; ++t) rotate(&w(sl, t, 0), C, s.rotate, prescale ? factor : 1.0f);
  }
  if (prescale && s.rotate != Rt::h128_bf16)
    for (float& v : o.val) v = v * factor;
  // 4. MX: E8M0 per block of `block` channels (Q/K) or tokens (V), then element casts.
  if (s.family == Scheme::Family::mx) {
    Scheme sx = s;  // the scheme as a buggy quantizer reads it (== s without bugs)
    if (bugs.e8m0_floor) sx.e8m0 = Scheme::E8M0Rule::floor;
    o.mx = true;
    o.block = s.block;
    const std::int64_t nb = as_v ? (T + s.block - 1) / s.block : (C + s.block - 1) / s.block;
    o.bexp.assign(static_cast<std::size_t>(as_v ? slabs * nb * C : slabs * T * nb), 0);
    for (std::int64_t sl = 0; sl < slabs; ++sl)
      for (std::int64_t outer = 0; outer < (as_v ? C : T); ++outer)
        for (std::int64_t b = 0; b < nb; ++b) {
          const std::int64_t lo = b * s.block, hi = std::min(lo + s.block, as_v ? T : C);
          auto elem = [&](std::int64_t i) -> float& { return as_v ? w(sl, i, outer) : w(sl, outer, i); };
          float amax = 0;
          for (std::int64_t i = lo; i < hi; ++i) amax_into(amax, elem(i));
          const std::uint8_t code = e8m0_code(amax, sx);
          const float mult = e8m0_multiplier(code, sx);
          for (std::int64_t i = lo; i < hi; ++i) elem(i) = mx_element(elem(i) * mult, sx);
          const auto e = static_cast<std::int16_t>(code == 0xFF ? kNanExp : code - 127 - (bugs.e8m0_bias ? 1 : 0));
          o.bexp[static_cast<std::size_t>(as_v ? (sl * nb + b) * C + outer : (sl * T + outer) * nb + b)] = e;
        }
    return o;
  }
  // 5. Uniform scales (int8 / fp8): group of each element.
  const float qmax = s.scale_max;
  const bool role_k = s.role == Scheme::Role::k, apply_mul = s.apply == Scheme::ApplyOp::mul;
  using G = Scheme::Granularity;
  if (as_v && s.granularity != G::per_tensor && s.granularity != G::per_channel)
    throw Error("scheme " + scheme_head(s) + ": V's scale must be per_tensor or per_channel");
  const bool half_blocks = bugs.block_mismatch && s.granularity == G::per_block && s.block >= 2;
  const std::int64_t rows = s.granularity == G::per_block ? (half_blocks ? s.block / 2 : s.block)
                          : (s.granularity == G::per_warp || s.granularity == G::per_thread) ? warp_rows(s) : 1;
  const std::int64_t per_slab_t = s.granularity == G::per_token ? T : (T + rows - 1) / rows;
  const std::int64_t groups_c = s.granularity == G::per_thread ? (role_k ? 4 : 8) : s.granularity == G::per_channel ? C : 1;
  auto group = [&](std::int64_t sl, std::int64_t t, std::int64_t c) -> std::int64_t {
    switch (s.granularity) {
      case G::per_tensor: return 0;
      case G::per_channel: return sl * C + c;
      case G::per_token: return sl * T + t;
      case G::per_block:
      case G::per_warp: return sl * per_slab_t + t / rows;
      case G::per_thread: return (sl * per_slab_t + t / rows) * groups_c + (role_k ? (t % 8) / 2 : t % 8);
    }
    return 0;
  };
  const std::int64_t ngroups = s.granularity == G::per_tensor ? 1 : s.granularity == G::per_channel ? slabs * C : s.granularity == G::per_token ? slabs * T
                                                         : slabs * per_slab_t * groups_c;
  std::vector<float> amax(static_cast<std::size_t>(ngroups), 0.0f);
  for (std::int64_t sl = 0; sl < slabs; ++sl)
    for (std::int64_t t = 0; t < T; ++t)
      for (std::int64_t c = 0; c < C; ++c) amax_into(amax[static_cast<std::size_t>(group(sl, t, c))], w(sl, t, c));
  std::vector<float> scale(amax.size()), mult(amax.size(), 1.0f);
  using R = Scheme::ScaleRule;
  for (std::size_t g = 0; g < amax.size(); ++g) {
    const float a = amax[g];
    switch (s.scale) {
      case R::ieee: scale[g] = a / qmax; break;
      case R::rcp: scale[g] = a * (1.0f / qmax); break;
      case R::eps: scale[g] = a / qmax + kSageEps; break;
      case R::floor: scale[g] = std::max(a, kSageEps) / qmax; break;
      case R::ieee_one: scale[g] = a == 0.0f ? 1.0f : a / qmax; break;
      case R::none: scale[g] = 1.0f; break;
    }
    if (apply_mul) {
      if (s.scale == R::floor) mult[g] = qmax / std::max(a, kSageEps);
      else if (s.scale == R::ieee || s.scale == R::rcp) mult[g] = qmax / a;
      else throw Error("scheme " + scheme_head(s) + ": apply=mul needs scale=ieee, rcp or floor");
    }
  }
  o.ival = s.family == Scheme::Family::int8;
  const Overflow sat = bugs.v_nosat ? Overflow::ieee : s.overflow;
  for (std::int64_t sl = 0; sl < slabs; ++sl)
    for (std::int64_t t = 0; t < T; ++t)
      for (std::int64_t c = 0; c < C; ++c) {
        const auto g = static_cast<std::size_t>(group(sl, t, c));
        const float q = apply_mul ? w(sl, t, c) * mult[g] : w(sl, t, c) / scale[g];
        if (o.ival) w(sl, t, c) = bugs.int8_trunc ? (std::isnan(q) ? 0.0f : std::clamp(std::trunc(q), -128.0f, 127.0f)) : to_int8(q, s.int_round);
        else w(sl, t, c) = round_to(format_spec(s.element), q, s.elem_round, sat);
      }
  if (as_v) {
    for (std::int64_t sl = 0; sl < slabs; ++sl)
      for (std::int64_t c = 0; c < C; ++c) o.cs[static_cast<std::size_t>(sl * C + c)] = scale[static_cast<std::size_t>(group(sl, 0, c))];
  } else {
    for (std::int64_t sl = 0; sl < slabs; ++sl)
      for (std::int64_t t = 0; t < T; ++t) {
        // block_mismatch: scale number t / block of an array of half-block scales.
        const std::int64_t ts_of = half_blocks ? (t / s.block) * rows : t;
        o.ts[static_cast<std::size_t>(sl * T + t)] = scale[static_cast<std::size_t>(group(sl, ts_of, 0))];
      }
  }
  return o;
}

}  // namespace attest::kernels::cpu
