// The device quantizers' plan of a scheme string: read by core's grammar (attest/core/scheme.hpp,
// shared with reference/ and kernels/cpu) and converted to the plain-data qm::Scheme the kernels
// take. The arithmetic (quantize_math.hpp) keeps its own format constants.
#include <string>

#include "attest/core/scheme.hpp"
#include "attest/core/status.hpp"
#include "attest/kernels/gpu/quantize.hpp"

namespace attest::gpu {
namespace {

using C = attest::Scheme;

// The plan's enums list core's values in core's order (a cast converts them).
static_assert(static_cast<int>(qm::Gran::channel) == static_cast<int>(C::Granularity::per_channel) &&
              static_cast<int>(qm::Gran::block) == static_cast<int>(C::Granularity::per_block) &&
              static_cast<int>(qm::Gran::warp) == static_cast<int>(C::Granularity::per_warp) &&
              static_cast<int>(qm::Gran::thread) == static_cast<int>(C::Granularity::per_thread) &&
              static_cast<int>(qm::Gran::token) == static_cast<int>(C::Granularity::per_token));
static_assert(static_cast<int>(qm::Rule::rcp) == static_cast<int>(C::ScaleRule::rcp) &&
              static_cast<int>(qm::Rule::eps) == static_cast<int>(C::ScaleRule::eps) &&
              static_cast<int>(qm::Rule::floor) == static_cast<int>(C::ScaleRule::floor) &&
              static_cast<int>(qm::Rule::ieee_one) == static_cast<int>(C::ScaleRule::ieee_one) &&
              static_cast<int>(qm::Rule::none) == static_cast<int>(C::ScaleRule::none));
static_assert(static_cast<int>(qm::E8::ceil) == static_cast<int>(C::E8M0Rule::ceil) &&
              static_cast<int>(qm::E8::rceil) == static_cast<int>(C::E8M0Rule::rceil) &&
              static_cast<int>(qm::E8::aiter_hip_fp4) == static_cast<int>(C::E8M0Rule::aiter_hip_fp4) &&
              static_cast<int>(qm::E8::aiter_triton_v_fp4) == static_cast<int>(C::E8M0Rule::aiter_triton_v_fp4) &&
              static_cast<int>(qm::E8::aiter_triton_rne) == static_cast<int>(C::E8M0Rule::aiter_triton_rne) &&
              static_cast<int>(qm::E8::aiter_hip_fp8) == static_cast<int>(C::E8M0Rule::aiter_hip_fp8) &&
              static_cast<int>(qm::E8::aiter_hip_fp6) == static_cast<int>(C::E8M0Rule::aiter_hip_fp6));
static_assert(static_cast<int>(qm::Tie::away) == static_cast<int>(C::Rounding::away) &&
              static_cast<int>(qm::Tie::smaller) == static_cast<int>(C::Rounding::smaller));
static_assert(static_cast<int>(qm::Ovf::sat_cuda) == static_cast<int>(C::Overflow::sat_cuda) &&
              static_cast<int>(qm::Ovf::sat_hip) == static_cast<int>(C::Overflow::sat_hip));
static_assert(static_cast<int>(qm::Smooth::fp32) == static_cast<int>(C::Smoothing::fp32) &&
              static_cast<int>(qm::Smooth::bf16) == static_cast<int>(C::Smoothing::bf16));
static_assert(static_cast<int>(qm::Rotate::h128) == static_cast<int>(C::Rotation::h128) &&
              static_cast<int>(qm::Rotate::h128_bf16) == static_cast<int>(C::Rotation::h128_bf16) &&
              static_cast<int>(qm::Rotate::h32_bf16) == static_cast<int>(C::Rotation::h32_bf16));

}  // namespace

qm::Fmt device_fmt(FormatId f) {
  switch (f) {
    case FormatId::bf16: return qm::Fmt::bf16;
    case FormatId::fp16: return qm::Fmt::fp16;
    case FormatId::fp8_e4m3fn: return qm::Fmt::e4m3fn;
    case FormatId::fp8_e5m2: return qm::Fmt::e5m2;
    case FormatId::fp8_e4m3fnuz: return qm::Fmt::e4m3fnuz;
    case FormatId::fp8_e5m2fnuz: return qm::Fmt::e5m2fnuz;
    case FormatId::fp6_e2m3fn: return qm::Fmt::e2m3;
    case FormatId::fp6_e3m2fn: return qm::Fmt::e3m2;
    case FormatId::fp4_e2m1fn: return qm::Fmt::e2m1;
    case FormatId::int8: return qm::Fmt::int8;
    case FormatId::e8m0fnu:
    case FormatId::f32: break;
  }
  throw Error("format " + std::string(name(f)) + " is not an element format of the device quantizers");
}

DeviceScheme parse_device_scheme(std::string_view text) {
  const C c = attest::parse_scheme(text);
  qm::Scheme s;
  switch (c.family) {
    case C::Family::cast: s.fam = qm::Fam::cast; break;
    case C::Family::int8: s.fam = qm::Fam::int8; break;
    case C::Family::fp8: s.fam = qm::Fam::fp8; break;
    case C::Family::mx: s.fam = qm::Fam::mx; break;
    case C::Family::identity:
      // Accepted by the grammar for recipes; there are no codes or scales to produce for it.
      throw Error("scheme '" + std::string(text) + "': f32 is the identity operand of a recipe, not a quantizer");
  }
  s.elem = device_fmt(c.element);
  s.gran = static_cast<qm::Gran>(c.granularity);
  s.block = c.block;
  s.role_k = c.role == C::Role::k;
  if (c.granularity == C::Granularity::per_warp || c.granularity == C::Granularity::per_thread)
    s.warp_rows = c.arch == C::SageArch::sm90 ? (s.role_k ? 128 : 16) : (s.role_k ? 64 : 32);
  s.rule = static_cast<qm::Rule>(c.scale);
  s.qmax = c.scale_max;
  s.e8 = static_cast<qm::E8>(c.e8m0);
  s.int_half = c.int_round == C::IntRounding::half;
  s.tie = static_cast<qm::Tie>(c.elem_round);
  s.ovf = static_cast<qm::Ovf>(c.overflow);
  s.apply_mul = c.apply == C::ApplyOp::mul;
  s.smooth = static_cast<qm::Smooth>(c.smooth);
  s.prescale = c.prescale == C::Prescale::sm_log2e;
  s.rotate = static_cast<qm::Rotate>(c.rotate);
  return DeviceScheme{std::string(text), s};
}

}  // namespace attest::gpu
