#include "cpu/cpu_scheme.hpp"

#include <string>

#include "attest/core/scheme.hpp"
#include "attest/core/status.hpp"

namespace attest::kernels::cpu {
namespace {

// The plan's enums list core's values in core's order (a cast converts them).
using C = attest::Scheme;
static_assert(static_cast<int>(Scheme::Gran::channel) == static_cast<int>(C::Granularity::per_channel) &&
              static_cast<int>(Scheme::Gran::warp) == static_cast<int>(C::Granularity::per_warp) &&
              static_cast<int>(Scheme::Gran::thread) == static_cast<int>(C::Granularity::per_thread) &&
              static_cast<int>(Scheme::Gran::token) == static_cast<int>(C::Granularity::per_token) &&
              static_cast<int>(Scheme::Gran::block) == static_cast<int>(C::Granularity::per_block));
static_assert(static_cast<int>(Scheme::Rule::rcp) == static_cast<int>(C::ScaleRule::rcp) &&
              static_cast<int>(Scheme::Rule::eps) == static_cast<int>(C::ScaleRule::eps) &&
              static_cast<int>(Scheme::Rule::floor) == static_cast<int>(C::ScaleRule::floor) &&
              static_cast<int>(Scheme::Rule::ieee_one) == static_cast<int>(C::ScaleRule::ieee_one) &&
              static_cast<int>(Scheme::Rule::none) == static_cast<int>(C::ScaleRule::none));
static_assert(static_cast<int>(Scheme::Smooth::fp32) == static_cast<int>(C::Smoothing::fp32) &&
              static_cast<int>(Scheme::Smooth::bf16) == static_cast<int>(C::Smoothing::bf16));
static_assert(static_cast<int>(Scheme::Rotate::h128) == static_cast<int>(C::Rotation::h128) &&
              static_cast<int>(Scheme::Rotate::h128_bf16) == static_cast<int>(C::Rotation::h128_bf16) &&
              static_cast<int>(Scheme::Rotate::h32_bf16) == static_cast<int>(C::Rotation::h32_bf16));

}  // namespace

const FloatFmt& float_fmt(FormatId f) {
  switch (f) {
    case FormatId::bf16: return kBf16;
    case FormatId::fp16: return kFp16;
    case FormatId::fp8_e4m3fn: return kE4m3;
    case FormatId::fp8_e5m2: return kE5m2;
    case FormatId::fp8_e4m3fnuz: return kE4m3fnuz;
    case FormatId::fp8_e5m2fnuz: return kE5m2fnuz;
    case FormatId::fp6_e2m3fn: return kE2m3;
    case FormatId::fp6_e3m2fn: return kE3m2;
    case FormatId::fp4_e2m1fn: return kE2m1;
    case FormatId::e8m0fnu:
    case FormatId::int8:
    case FormatId::f32: break;
  }
  throw Error("format " + std::string(name(f)) + " is not a small float format of the CPU kernels");
}

Scheme parse_scheme(std::string_view text) {
  const C c = attest::parse_scheme(text);
  Scheme s;
  s.head = scheme_head(c);
  switch (c.family) {
    case C::Family::identity: s.kind = Scheme::Kind::f32; break;
    case C::Family::cast: s.kind = Scheme::Kind::cast; break;
    case C::Family::int8: s.kind = Scheme::Kind::int8; break;
    case C::Family::fp8: s.kind = Scheme::Kind::fp8; break;
    case C::Family::mx: s.kind = Scheme::Kind::mx; break;
  }
  // int8 elements (int8, mxint8) and f32 have no FloatFmt; elem keeps its unused default.
  s.mx_int8 = c.family == C::Family::mx && c.element == FormatId::int8;
  if (c.element != FormatId::int8 && c.element != FormatId::f32) s.elem = float_fmt(c.element);
  s.gran = static_cast<Scheme::Gran>(c.granularity);
  s.rule = static_cast<Scheme::Rule>(c.scale);
  s.smooth = static_cast<Scheme::Smooth>(c.smooth);
  s.rotate = static_cast<Scheme::Rotate>(c.rotate);
  s.block = c.block;
  s.sm90 = c.arch == C::SageArch::sm90;
  s.role_k = c.role == C::Role::k;
  s.scale_max = c.scale_max;
  s.e8m0 = std::string(name(c.e8m0));
  s.int_round = c.int_round == C::IntRounding::half ? IntRound::half : IntRound::rne;
  s.tie = c.elem_round == C::Rounding::away ? Tie::away : c.elem_round == C::Rounding::smaller ? Tie::smaller : Tie::even;
  s.sat = c.overflow == C::Overflow::ieee ? Sat::ieee : c.overflow == C::Overflow::sat_cuda ? Sat::satfinite : Sat::sat_hip;
  s.apply_mul = c.apply == C::ApplyOp::mul;
  s.prescale = c.prescale == C::Prescale::sm_log2e;
  return s;
}

std::string unsupported_reason(const Scheme& s) {
  return {};
}

}  // namespace attest::kernels::cpu
