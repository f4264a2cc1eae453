// Reference quantizers (see quantize.hpp). Every FP32 expression below is one IEEE operation per
// operator with -ffp-contract=off, so the source order is the rounding order.
#include "attest/reference/quantize.hpp"

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "attest/core/status.hpp"
#include "attest/reference/hadamard.hpp"

namespace attest::ref {
namespace {

std::uint32_t bits(float x) { return std::bit_cast<std::uint32_t>(x); }
float from_bits(std::uint32_t u) { return std::bit_cast<float>(u); }
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kEps = 1e-7f;  // Sage's epsilon, an fp32 literal in both the Triton and CUDA code

// Element access of a tensor viewed as [lead..., T, C] with arbitrary strides.
struct Slabs {
  Shape lead;
  std::int64_t n = 1, T = 0, C = 0;
  std::vector<std::int64_t> base;  // element offset of (slab, 0, 0)
  std::int64_t st = 0, sc = 0;
};

Slabs slabs_of(const Tensor& x) {
  Slabs s;
  const int r = x.rank();
  s.lead.assign(x.shape().begin(), x.shape().end() - 2);
  s.T = x.dim(r - 2);
  s.C = x.dim(r - 1);
  s.st = x.strides()[static_cast<std::size_t>(r - 2)];
  s.sc = x.strides()[static_cast<std::size_t>(r - 1)];
  s.n = shape_numel(s.lead);
  s.base.resize(static_cast<std::size_t>(s.n));
  std::vector<std::int64_t> idx(s.lead.size(), 0);
  for (std::int64_t i = 0; i < s.n; ++i) {
    std::int64_t off = 0;
    for (std::size_t d = 0; d < idx.size(); ++d) off += idx[d] * x.strides()[d];
    s.base[static_cast<std::size_t>(i)] = off;
    for (std::size_t d = idx.size(); d-- > 0;) {
      if (++idx[d] < s.lead[d]) break;
      idx[d] = 0;
    }
  }
  return s;
}

Shape with_tail(Shape lead, std::int64_t a, std::int64_t b) {
  lead.push_back(a);
  lead.push_back(b);
  return lead;
}

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

// Scale grid of a scheme: scales tensor is [lead..., GT, GC] (or all ones when `global`).
struct Grid {
  bool global = false;
  std::int64_t GT = 1, GC = 1, rows = 1;  // rows: tokens per GT step (block / warp)
  Granularity g = Granularity::per_tensor;
  Family family = Family::int8;
  Role role = Role::q;
  std::int64_t mx_block = 32;

  [[nodiscard]] std::int64_t index(std::int64_t slab, std::int64_t t, std::int64_t c) const {
    if (global) return 0;
    std::int64_t gt = 0, gc = 0;
    if (family == Family::mx) {
      gt = t;
      gc = c / mx_block;
    } else {
      switch (g) {
        case Granularity::per_tensor: return 0;
        case Granularity::per_block:
        case Granularity::per_warp: gt = t / rows; break;
        case Granularity::per_thread:
          gt = t / rows;
          // The warp height is a multiple of 8, so t % 8 is the row's position in its 8-row tile.
          gc = role == Role::q ? t % 8 : (t % 8) / 2;
          break;
        case Granularity::per_token: gt = t; break;
        case Granularity::per_channel: gc = c; break;
      }
    }
    return (slab * GT + gt) * GC + gc;
  }
};

Grid grid_of(const Scheme& s, std::int64_t T, std::int64_t C) {
  Grid g;
  g.family = s.family;
  g.g = s.granularity;
  g.role = s.role;
  if (s.family == Family::cast) {
    g.global = true;
    return g;
  }
  if (s.family == Family::mx) {
    g.mx_block = s.block;
    g.GT = T;
    g.GC = ceil_div(C, s.block);
    return g;
  }
  switch (s.granularity) {
    case Granularity::per_tensor: g.global = true; break;
    case Granularity::per_block: g.rows = s.block; g.GT = ceil_div(T, s.block); break;
    case Granularity::per_warp: g.rows = sage_warp_rows(s.arch, s.role); g.GT = ceil_div(T, g.rows); break;
    case Granularity::per_thread:
      g.rows = sage_warp_rows(s.arch, s.role);
      g.GT = ceil_div(T, g.rows);
      g.GC = sage_thread_groups(s.role);
      break;
    case Granularity::per_token: g.GT = T; break;
    case Granularity::per_channel: g.GC = C; break;
  }
  return g;
}

DType codes_dtype(const Scheme& s) {
  if (s.family == Family::cast) return DType::u16;
  if (s.element == FormatId::int8) return DType::i8;
  return DType::u8;
}
DType scales_dtype(const Scheme& s) { return s.family == Family::mx ? DType::u8 : DType::f32; }

void check_shape(const Tensor& t, const Shape& want, DType dt, const std::string& what) {
  if (t.dtype() != dt)
    throw Error(what + ": dtype " + std::string(dtype_name(t.dtype())) + ", expected " + std::string(dtype_name(dt)));
  if (t.shape() != want) throw Error(what + ": shape " + shape_string(t.shape()) + ", expected " + shape_string(want));
}

// NaN-propagating amax (torch.amax semantics): one NaN makes the group's amax NaN.
void amax_update(float& amax, float v) {
  const float a = std::fabs(v);
  if (std::isnan(a) || a > amax) amax = a;
}

}  // namespace

float sage_prescale(double sm_scale) { return static_cast<float>(sm_scale * 1.44269504); }

std::int64_t sage_warp_rows(SageArch arch, Role role) {
  if (arch == SageArch::sm89) return role == Role::q ? 32 : 64;
  return role == Role::q ? 16 : 128;
}
std::int64_t sage_thread_groups(Role role) { return role == Role::q ? 8 : 4; }

void require_quantizer(const Scheme& s) {
  // Accepted by the grammar for recipes (an operand left as it is); a quantizer has nothing to
  // produce for it: no codes, no scales.
  if (s.family == Family::identity)
    throw Error("scheme '" + scheme_head(s) + "': f32 is the identity operand of a recipe, not a quantizer");
}

Shape scales_shape(const Shape& x_shape, const Scheme& s) {
  require_quantizer(s);
  if (x_shape.size() < 2) throw Error("quantize: input of rank " + std::to_string(x_shape.size()) + ", need [..., tokens, channels]");
  const std::int64_t T = x_shape[x_shape.size() - 2], C = x_shape.back();
  const Grid g = grid_of(s, T, C);
  if (g.global) return Shape(x_shape.size(), 1);
  return with_tail(Shape(x_shape.begin(), x_shape.end() - 2), g.GT, g.GC);
}

float uniform_scale(float amax, ScaleRule rule, float qmax) {
  switch (rule) {
    case ScaleRule::ieee: return amax / qmax;
    case ScaleRule::rcp: return amax * (1.0f / qmax);
    case ScaleRule::eps: return amax / qmax + kEps;
    case ScaleRule::floor: return (amax < kEps ? kEps : amax) / qmax;
    case ScaleRule::ieee_one: return amax == 0.0f ? 1.0f : amax / qmax;
    case ScaleRule::none: return 1.0f;
  }
  return kNaN;
}

float uniform_inverse(float amax, ScaleRule rule, float qmax) {
  switch (rule) {
    case ScaleRule::ieee:
    case ScaleRule::rcp: return qmax / amax;
    case ScaleRule::floor: return qmax / (amax < kEps ? kEps : amax);
    default: throw Error("apply=mul needs scale=ieee, rcp or floor, not " + std::string(attest::name(rule)));
  }
}

std::int8_t to_int8(float q, IntRounding r) {
  if (r == IntRounding::rne)
    return static_cast<std::int8_t>(static_cast<std::uint8_t>(encode(FormatId::int8, q, Rounding::rne, Overflow::ieee)));
  const float t = q + (q >= 0.0f ? 0.5f : -0.5f);
  std::int32_t i = 0;  // cvt.rzi.s32.f32: truncate, saturate, NaN -> 0
  if (std::isnan(t)) i = 0;
  else if (t >= 2147483648.0f) i = std::numeric_limits<std::int32_t>::max();
  else if (t < -2147483648.0f) i = std::numeric_limits<std::int32_t>::min();
  else i = static_cast<std::int32_t>(t);
  return static_cast<std::int8_t>(static_cast<std::uint8_t>(static_cast<std::uint32_t>(i) & 0xFFu));
}

float mx_element_max(FormatId element) {
  return element == FormatId::int8 ? 127.0f / 64.0f : static_cast<float>(format_info(element).max_finite);
}

std::uint8_t e8m0_scale(float amax, E8M0Rule rule, FormatId element) {
  if (!std::isfinite(amax)) return 0xFF;
  const float a = std::fabs(amax);
  const std::uint32_t u = bits(a);
  const int e = static_cast<int>(u >> 23);
  const std::uint32_t m = u & 0x7FFFFFu;
  const int emax = element == FormatId::int8 ? 0 : format_info(element).emax_elem;
  auto clamp = [](int v, int lo, int hi) { return v < lo ? lo : (v > hi ? hi : v); };
  switch (rule) {
    case E8M0Rule::floor: return static_cast<std::uint8_t>(clamp(e - 127 - emax, -127, 127) + 127);
    case E8M0Rule::ceil: return static_cast<std::uint8_t>(clamp(e - 127 + (m != 0 ? 1 : 0) - emax, -127, 127) + 127);
    case E8M0Rule::rceil: {
      const float d = a * (1.0f / mx_element_max(element));
      if (!std::isfinite(d)) return 0xFF;
      const std::uint32_t ud = bits(d);
      const int ed = static_cast<int>(ud >> 23);
      const std::uint32_t md = ud & 0x7FFFFFu;
      const int code = ed == 0 ? (md > 0x400000u ? 1 : 0) : ed + (md != 0 ? 1 : 0);
      return static_cast<std::uint8_t>(code > 254 ? 254 : code);
    }
    case E8M0Rule::aiter_hip_fp4: return static_cast<std::uint8_t>(((bits(a / 6.0f) + 0x7FFFFFu) & 0x7F800000u) >> 23);
    case E8M0Rule::aiter_triton_v_fp4: {
      const std::uint32_t v = bits(a < 1e-12f ? 1e-12f : a);
      return static_cast<std::uint8_t>(static_cast<int>(v >> 23) - 2 + ((v & 0x7FFFFFu) > 0x400000u ? 1 : 0));
    }
    case E8M0Rule::aiter_triton_rne: {
      const bool up = m > 0x400000u || (m == 0x400000u && (e & 1) != 0);
      return static_cast<std::uint8_t>(clamp(e + (up ? 1 : 0) - 2, 0, 254));
    }
    case E8M0Rule::aiter_hip_fp8: {
      int c = static_cast<int>(((u + 0x200000u) & 0x7F800000u) >> 23) - 8;
      if (c < 0) c = 0;
      if (c == 255) c = 254;
      return static_cast<std::uint8_t>(c);
    }
    case E8M0Rule::aiter_hip_fp6:
      return a == 0.0f ? std::uint8_t{127} : static_cast<std::uint8_t>(static_cast<unsigned>(e - 2) & 0xFFu);
  }
  return 0xFF;
}

float e8m0_element_multiplier(std::uint8_t code, E8M0Rule rule) {
  if (code == 0xFF) return kNaN;
  if (rule == E8M0Rule::aiter_hip_fp8) return from_bits(static_cast<std::uint32_t>(254 - code) << 23);
  return std::ldexp(1.0f, 127 - static_cast<int>(code));  // exact: 2^127 .. 2^-127 (subnormal)
}

std::uint8_t mx_element_code(float v, FormatId element, Rounding r, Overflow o) {
  if (element == FormatId::int8) {
    const float w = v * 64.0f;  // exact (power of two) unless it overflows, which saturates below
    auto c = static_cast<std::int8_t>(static_cast<std::uint8_t>(encode(FormatId::int8, w, r, Overflow::ieee)));
    if (c == -128) c = -127;  // MXINT8 range is +-127/64
    return static_cast<std::uint8_t>(c);
  }
  return static_cast<std::uint8_t>(encode(element, v, r, o));
}

float mx_element_value(std::uint8_t code, FormatId element) {
  if (element == FormatId::int8) return static_cast<float>(static_cast<std::int8_t>(code)) / 64.0f;
  return decode(element, code);
}

std::uint8_t quantize_p(float p_scaled, FormatId f) {
  return static_cast<std::uint8_t>(encode(f, p_scaled, Rounding::rne, Overflow::sat_cuda));
}

float p_offset(PScale ps) {
  switch (ps) {
    case PScale::unit: return 0.0f;
    case PScale::offset_8807: return 8.807f;
    case PScale::pow2_8: return 8.0f;
  }
  return 0.0f;
}

float dequantize_p(std::uint8_t code, PScale ps, FormatId f) {
  // libm exp2 in double (error ~1e-16 relative) then one rounding to float: exact for unit and
  // pow2_8; for offset_8807 at most a near-tie can differ from the correctly rounded quotient.
  return static_cast<float>(static_cast<double>(decode(f, code)) / std::exp2(static_cast<double>(p_offset(ps))));
}

Tensor prepare(const Tensor& x, const Scheme& s, const QuantInputs& in, Tensor* mean) {
  validate_scheme(s);
  require_quantizer(s);
  if (x.dtype() != DType::f32) throw Error("quantize: input dtype " + std::string(dtype_name(x.dtype())) + ", need f32");
  if (x.rank() < 2) throw Error("quantize: input of rank " + std::to_string(x.rank()) + ", need [..., tokens, channels]");
  const Slabs sl = slabs_of(x);
  const std::int64_t n = sl.n, T = sl.T, C = sl.C;
  const float* xp = x.numel() > 0 ? x.data<float>() : nullptr;
  Tensor wt(DType::f32, x.shape());
  float* w = x.numel() > 0 ? wt.data<float>() : nullptr;
  auto at = [&](std::int64_t i, std::int64_t t, std::int64_t c) -> float& { return w[(i * T + t) * C + c]; };
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t t = 0; t < T; ++t)
      for (std::int64_t c = 0; c < C; ++c) at(i, t, c) = xp[sl.base[static_cast<std::size_t>(i)] + t * sl.st + c * sl.sc];

  float factor = 1.0f;
  if (s.prescale == Prescale::sm_log2e) {
    if (!(std::isfinite(in.sm_scale) && in.sm_scale > 0))
      throw Error("quantize: prescale=sm_log2e needs a finite sm_scale > 0, got " + std::to_string(in.sm_scale));
    factor = sage_prescale(in.sm_scale);
  }
  if ((s.rotate == Rotation::h128 || s.rotate == Rotation::h128_bf16) && C != 128)
    throw Error("quantize: rotate=" + std::string(s.rotate == Rotation::h128 ? "h128" : "h128_bf16") + " needs 128 channels, got " + std::to_string(C));
  if (s.rotate == Rotation::h32_bf16 && C % 32 != 0)
    throw Error("quantize: rotate=h32_bf16 needs a multiple of 32 channels, got " + std::to_string(C));

  // 1. K smoothing.
  if (s.smooth != Smoothing::none) {
    Tensor km_t(DType::f32, with_tail(sl.lead, 1, C));
    float* mp = km_t.numel() > 0 ? km_t.data<float>() : nullptr;
    if (in.mean != nullptr) {
      check_shape(*in.mean, km_t.shape(), DType::f32, "quantize: smoothing mean");
      const Slabs ms = slabs_of(*in.mean);
      const float* src = in.mean->data<float>();
      for (std::int64_t i = 0; i < n; ++i)
        for (std::int64_t c = 0; c < C; ++c) mp[i * C + c] = src[ms.base[static_cast<std::size_t>(i)] + c * ms.sc];
    } else {
      for (std::int64_t i = 0; i < n; ++i)
        for (std::int64_t c = 0; c < C; ++c) {
          double acc = 0.0;
          for (std::int64_t t = 0; t < T; ++t) acc += static_cast<double>(at(i, t, c));
          float km = T > 0 ? static_cast<float>(acc / static_cast<double>(T)) : 0.0f;
          if (s.smooth == Smoothing::bf16) km = round_to(FormatId::bf16, km);
          mp[i * C + c] = km;
        }
    }
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t t = 0; t < T; ++t)
        for (std::int64_t c = 0; c < C; ++c) {
          const float d = at(i, t, c) - mp[i * C + c];
          at(i, t, c) = s.smooth == Smoothing::bf16 ? round_to(FormatId::bf16, d) : d;
        }
    if (mean != nullptr) *mean = km_t;
  }
  // 2. Rotation of each token's channels; 3. Q prescale (unless the rotation consumed it).
  bool prescale_pending = s.prescale != Prescale::none;
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t t = 0; t < T; ++t) {
      float* row = &at(i, t, 0);
      switch (s.rotate) {
        case Rotation::none: break;
        case Rotation::h128: hadamard128(std::span<float, 128>(row, 128)); break;
        case Rotation::h128_bf16: hadamard128_bf16(std::span<float, 128>(row, 128), factor); break;
        case Rotation::h32_bf16: hadamard32_bf16(std::span<float>(row, static_cast<std::size_t>(C))); break;
      }
    }
  if (s.rotate == Rotation::h128_bf16) prescale_pending = false;
  if (prescale_pending)
    for (std::int64_t k = 0; k < n * T * C; ++k) w[k] = w[k] * factor;
  return wt;
}

Quantized quantize(const Tensor& x, const Scheme& s, const QuantInputs& in) {
  Quantized out;
  const Tensor wt = prepare(x, s, in, &out.mean);
  const int r = x.rank();
  const std::int64_t T = x.dim(r - 2), C = x.dim(r - 1);
  const std::int64_t n = shape_numel(Shape(x.shape().begin(), x.shape().end() - 2));
  const float* w = x.numel() > 0 ? wt.data<float>() : nullptr;
  auto at = [&](std::int64_t i, std::int64_t t, std::int64_t c) { return w[(i * T + t) * C + c]; };


  // 4. Group amax and scales.
  const Grid g = grid_of(s, T, C);
  const Shape sshape = scales_shape(x.shape(), s);
  const auto ngroups = static_cast<std::size_t>(shape_numel(sshape));
  std::vector<float> amax(ngroups, 0.0f);
  if (s.family != Family::cast)
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t t = 0; t < T; ++t)
        for (std::int64_t c = 0; c < C; ++c) amax_update(amax[static_cast<std::size_t>(g.index(i, t, c))], at(i, t, c));

  out.scales = Tensor(scales_dtype(s), sshape);
  out.codes = Tensor(codes_dtype(s), x.shape());
  std::vector<float> mult(ngroups, 1.0f);  // what elements are multiplied by (mul / mx)
  if (s.family == Family::mx) {
    auto* sp = out.scales.data<std::uint8_t>();
    for (std::size_t k = 0; k < ngroups; ++k) {
      sp[k] = e8m0_scale(amax[k], s.e8m0, s.element);
      mult[k] = e8m0_element_multiplier(sp[k], s.e8m0);
    }
  } else {
    auto* sp = out.scales.data<float>();
    for (std::size_t k = 0; k < ngroups; ++k) {
      sp[k] = s.family == Family::cast ? 1.0f : uniform_scale(amax[k], s.scale, s.scale_max);
      if (s.family != Family::cast && s.apply == ApplyOp::mul) mult[k] = uniform_inverse(amax[k], s.scale, s.scale_max);
    }
  }

  // 5. Element codes.
  const float* scale_f = s.family == Family::mx ? nullptr : out.scales.data<float>();
  std::uint16_t* c16 = s.family == Family::cast ? out.codes.data<std::uint16_t>() : nullptr;
  std::int8_t* ci8 = codes_dtype(s) == DType::i8 ? out.codes.data<std::int8_t>() : nullptr;
  std::uint8_t* cu8 = codes_dtype(s) == DType::u8 ? out.codes.data<std::uint8_t>() : nullptr;
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t t = 0; t < T; ++t)
      for (std::int64_t c = 0; c < C; ++c) {
        const auto k = static_cast<std::size_t>(g.index(i, t, c));
        const float v = at(i, t, c);
        const auto o = static_cast<std::size_t>((i * T + t) * C + c);
        switch (s.family) {
          case Family::cast: c16[o] = encode(s.element, v, s.elem_round, s.overflow); break;
          case Family::int8: ci8[o] = to_int8(s.apply == ApplyOp::div ? v / scale_f[k] : v * mult[k], s.int_round); break;
          case Family::fp8: {
            const float q = s.apply == ApplyOp::div ? v / scale_f[k] : v * mult[k];
            cu8[o] = static_cast<std::uint8_t>(encode(s.element, q, s.elem_round, s.overflow));
            break;
          }
          case Family::mx: {
            const std::uint8_t code = mx_element_code(v * mult[k], s.element, s.elem_round, s.overflow);
            if (ci8 != nullptr) ci8[o] = static_cast<std::int8_t>(code);
            else cu8[o] = code;
            break;
          }
          case Family::identity: break;  // refused by prepare
        }
      }
  return out;
}

Tensor dequantize(const Tensor& codes_in, const Tensor& scales_in, const Scheme& s) {
  validate_scheme(s);
  require_quantizer(s);
  if (codes_in.rank() < 2) throw Error("dequantize: codes of rank " + std::to_string(codes_in.rank()) + ", need [..., tokens, channels]");
  check_shape(codes_in, codes_in.shape(), codes_dtype(s), "dequantize: codes for " + to_string(s));
  check_shape(scales_in, scales_shape(codes_in.shape(), s), scales_dtype(s), "dequantize: scales for " + to_string(s));
  const Tensor codes = codes_in.contiguous();
  const Tensor scales = scales_in.contiguous();
  const std::int64_t r = codes.rank();
  const std::int64_t T = codes.dim(static_cast<int>(r - 2)), C = codes.dim(static_cast<int>(r - 1));
  const std::int64_t n = shape_numel(Shape(codes.shape().begin(), codes.shape().end() - 2));
  const Grid g = grid_of(s, T, C);
  Tensor out(DType::f32, codes.shape());
  float* op = out.numel() > 0 ? out.data<float>() : nullptr;
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t t = 0; t < T; ++t)
      for (std::int64_t c = 0; c < C; ++c) {
        const std::int64_t o = (i * T + t) * C + c;
        const auto k = static_cast<std::size_t>(g.index(i, t, c));
        switch (s.family) {
          case Family::cast: op[o] = decode(s.element, codes.data<std::uint16_t>()[o]); break;
          case Family::int8:
            op[o] = static_cast<float>(codes.data<std::int8_t>()[o]) * scales.data<float>()[k];
            break;
          case Family::fp8: op[o] = decode(s.element, codes.data<std::uint8_t>()[o]) * scales.data<float>()[k]; break;
          case Family::mx: {
            const std::uint8_t e = scales.data<std::uint8_t>()[k];
            const auto code = s.element == FormatId::int8 ? static_cast<std::uint8_t>(codes.data<std::int8_t>()[o])
                                                        : codes.data<std::uint8_t>()[o];
            const float X = e == 0xFF ? kNaN : std::ldexp(1.0f, static_cast<int>(e) - 127);
            op[o] = mx_element_value(code, s.element) * X;
            break;
          }
          case Family::identity: break;  // refused above
        }
      }
  return out;
}

}  // namespace attest::ref
