#pragma once
/// Recipe: the complete numerical contract of an attention kernel — operand formats and
/// quantizers, P scaling, exp2 policy, rescale policy, division op, tile sizes, accumulation
/// order and output rounding. The recipe emulator (reference/emulate) is the executable
/// definition of each field; kernels with a bitwise contract must equal it bit for bit.
///
/// String form (round-trips: parse_recipe(to_string(r)) == r), fields separated by ';', only
/// non-defaults printed, e.g.
///   q=int8:per_block=128:scale=ieee:round=half;k=int8:per_block=64:smooth=fp32;v=fp8_e4m3fn:per_channel;
///   p=fp8_e4m3fn;pscale=offset_8807;exp2=fa4;div=rcp_sm90;out=bf16
/// docs/recipes.md defines every field by the arithmetic the emulator performs.
/// Quantizer schemes (q, k, v, p_mx) use the grammar of core/scheme.hpp (docs/quantizer-schemes.md);
/// the recipe holds them parsed (attest::Scheme, the one scheme type of every engine), so
/// to_string prints their canonical form and no engine parses them again.
/// A named recipe (e.g. `sage_int8_fp8_perblock`) is a shorthand for one full string.
#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "attest/core/format.hpp"
#include "attest/core/scheme.hpp"

namespace attest {

/// Element formats of P (the softmax probabilities fed to P.V) and of the output O: these rows of
/// the format table (format.hpp), in this order (the order parse errors list them in).
inline constexpr std::array<FormatId, 7> kRecipeElemFormats{FormatId::f32, FormatId::bf16, FormatId::fp16,
                                                            FormatId::fp8_e4m3fn, FormatId::fp8_e4m3fnuz,
                                                            FormatId::fp8_e5m2, FormatId::fp4_e2m1fn};
/// How P is scaled before its cast: 1 (P in [0,1]), 2^8.807 via the row max offset (Sage; P in
/// [0, 448]), 2^8 (FA3/FA4 FP8: P in [0, 256]).
enum class PScale : std::uint8_t { unit, offset_8807, pow2_8 };
/// exp2 evaluation: `cr` correctly rounded float exp2; `fa4` the FlashAttention-4 polynomial
/// emulation (FORMATS.md, bit-exact twin); `hw` the hardware approximation (no bitwise contract).
enum class Exp2Policy : std::uint8_t { cr, fa4, hw };
/// `always` rescales the accumulator whenever the row max grows; `conditional` keeps the old max
/// while the growth (in log2 units) stays within `rescale_threshold` (FA4).
enum class RescalePolicy : std::uint8_t { always, conditional };
/// Final normalisation O = acc / l: `ieee_div` (acc / l), `ieee_rcp` (acc * fl(1/l)),
/// `rcp_sm90` (acc * rcp.approx.ftz(l), emulated exactly from the measured sm_90 table).
enum class DivisionOp : std::uint8_t { ieee_div, ieee_rcp, rcp_sm90 };
/// Where V's dequantization scale enters the normalisation (r = fl(1/l) or rcp(l)):
/// `out` O = fl(fl(acc / l or acc * r) * v_scale) (Sage: acc * rcp(d) * v_scale; AITER);
/// `rcp` O = fl(acc * fl(r * v_scale)) (FA3 FP8: O *= (1/sum) * v_descale); needs a reciprocal
/// division op. Without a V scale (casts) both are the plain normalisation.
enum class VScaleAt : std::uint8_t { out, rcp };

std::string_view name(PScale);
std::string_view name(Exp2Policy);
std::string_view name(RescalePolicy);
std::string_view name(DivisionOp);
std::string_view name(VScaleAt);

struct Recipe {
  Scheme q = default_scheme("bf16");  ///< quantizer scheme of Q (plain casts: bf16, fp16, f32)
  Scheme k = default_scheme("bf16");  ///< quantizer scheme of K (smoothing lives here)
  Scheme v = default_scheme("bf16");  ///< quantizer scheme of V
  FormatId p = FormatId::bf16;  ///< one of kRecipeElemFormats
  PScale pscale = PScale::unit;
  Exp2Policy exp2 = Exp2Policy::cr;
  RescalePolicy rescale = RescalePolicy::always;
  double rescale_threshold = 0;  ///< log2 units, for RescalePolicy::conditional
  DivisionOp div = DivisionOp::ieee_div;
  int tile_q = 64;   ///< query rows per tile (Br)
  int tile_kv = 64;  ///< keys per tile (Bc); accumulation over keys runs tile by tile in key order
  FormatId out = FormatId::bf16;  ///< one of kRecipeElemFormats
  VScaleAt vscale = VScaleAt::out;
  /// Quantizer scheme of P when P is block scaled (p = fp4_e2m1fn: MX blocks of `block` keys
  /// along each row, e.g. "mxfp4_e2m1fn:scale=aiter_hip_fp4"); none for element casts.
  std::optional<Scheme> p_mx;
  /// Precision of the P.V partial sums inside a KV tile: `f32` (every product fma'd into the FP32
  /// accumulator) or `fp16` (an FP16-accumulating MMA, e.g. Triton `tl.dot(p, v, out_dtype=float16)`
  /// in SageAttention 1: 16-key steps summed in FP32, added into an FP16 partial, which joins the
  /// FP32 accumulator at the tile's end). fp16 is a model for the noise budget, not a bitwise claim.
  FormatId pv_acc = FormatId::f32;

  /// True when a kernel can promise bitwise equality with the emulator (exp2 != hw).
  [[nodiscard]] bool bitwise_capable() const { return exp2 != Exp2Policy::hw; }
  bool operator==(const Recipe&) const = default;
};

std::string to_string(const Recipe& r);
/// Parses a full recipe string or a named recipe; throws attest::Error naming the defect.
Recipe parse_recipe(std::string_view s);

struct NamedRecipe {
  std::string_view name;
  std::string_view definition;  ///< full recipe string
  std::string_view summary;     ///< one line: what real kernel this models
};
/// The named recipes, in a stable order.
std::span<const NamedRecipe> named_recipes();
/// The name of the named recipe equal to r, or its full string when none matches.
std::string recipe_label(const Recipe& r);

}  // namespace attest
