#pragma once
// The tiled CPU attention kernel: one engine for every recipe, driven by the parsed Recipe, with
// a compile-time `Bug` parameter from which the mutants are derived (`if constexpr`: the
// production instantiation Bug::none carries no mutant branch).
//
// Structure (deliberately unlike the emulator's row-by-row loops): work items are
// (batch, head, query tile); a query tile of `tile_q` rows keeps one `RowState` per row
// (FlashInfer-style online-softmax state: running max, running sum, accumulator, with
// update/finalize) and walks the KV tiles in key order. Operands are quantized once per call
// into packed per-slab buffers (`Operand`). Per-row arithmetic is sequential in key order and
// depends only on that row's data, so the bits do not depend on threads, traversal order,
// layout or strides.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "attest/kernels/kernel.hpp"
#include "cpu/cpu_numerics.hpp"
#include "cpu/cpu_scheme.hpp"

namespace attest::kernels::cpu {

/// Planted bugs of the mutants (kernels/cpu/mutants). Bug::none is the production kernel.
enum class Bug : std::uint8_t {
  none,
  skip_last_kv_tile,   ///< a row's last KV tile is skipped when it is partial
  scale_off_1pct,      ///< softmax scale multiplied by 1.01
  no_rescale,          ///< accumulator and sum not rescaled when the row max grows
  causal_tl_for_br,    ///< top-left causal alignment where bottom-right is declared
  gqa_wrong_head,      ///< KV head h % Hkv instead of h / (H / Hkv)
  fp8_v_nosat,         ///< FP8 V cast without saturation (overflow -> NaN)
  int8_trunc,          ///< INT8 Q/K conversion truncates instead of rounding
  smooth_per_token,    ///< K smoothed by each token's channel mean instead of each channel's token mean
  lse_log2,            ///< LSE written in log2 units
  skip_last_q_tile,    ///< the last partial query tile is never computed nor written
  oob_write,           ///< one element written just past the output's last element
  contiguous_assumed,  ///< strides ignored: inputs and output read/written as contiguous bshd
  ignores_v_strides,   ///< V read with the dense strides of the problem's layout, not its own
  nondeterministic,    ///< row sum and P.V within a tile start at a key that rotates per call
  p_e5m2,              ///< P cast to e5m2 instead of the recipe's P format
  ftz_acc,             ///< FP32 accumulator flushed to zero when subnormal
  no_max_sub,          ///< P = exp2(logit) without subtracting the running max (max pinned at 0)
  causal_diag_off,     ///< causal masks exclude the diagonal key (`<` for `<=`)
  kv_swapped,          ///< K and V arguments swapped (when head_dim == head_dim_v)
  v_head_mixup,        ///< K uses KV head h / (H / Hkv), V uses h % Hkv
  qblock_mismatch,     ///< per_block quantizer scales per block/2 tokens, kernel reads them per block
  e8m0_floor,          ///< MX operand E8M0 scales by the OCP floor rule instead of the recipe's rule
  e8m0_bias,           ///< MX Q/K block exponents decoded with bias 128 instead of 127
  fa4_exp2_trunc,      ///< FA4 exp2 splits x by truncation toward zero instead of floor
  fa4_threshold_ratio, ///< FA4 rescale threshold 8 (log2 units) read as the ratio 2^8
  sage_lse_no_smooth,  ///< K-smoothing correction of the LSE omitted
  v_descale_missing,   ///< V's dequantization scale not applied to O
  v_descale_twice,     ///< V's dequantization scale applied twice to O
  cu_kv_from_q,        ///< ragged K/V rows addressed with cu_seqlens_q instead of cu_seqlens_kv
  scale_from_dv,       ///< default softmax scale 1/sqrt(head_dim_v) instead of 1/sqrt(head_dim)
  drop_first_kv_tile,  ///< a row's first KV tile is skipped when it has more than one
  drop_middle_kv_tile, ///< a row's second KV tile is skipped when it has three or more
};

/// The recipe as the engine uses it.
struct Plan {
  Recipe recipe;
  Scheme q, k, v;
};
/// Parses the recipe's schemes; throws attest::Error on a malformed scheme.
Plan make_plan(const Recipe& r);
/// Empty when the engine implements every field of the plan, else why not.
std::string plan_unsupported(const Plan& p);
/// The head_dim limits of the plan's Q/K rotation, declared in capabilities (a 128-channel
/// Hadamard needs head_dim 128, h32_bf16 a multiple of 32) so that the gate counts a refusal
/// outside them as UNSUPPORTED and one inside as a coverage failure.
inline void declare_rotation_limits(const Plan& p, Capabilities& c) {
  for (const Scheme* s : {&p.q, &p.k}) {
    if (s->rotate == Scheme::Rotation::h128 || s->rotate == Scheme::Rotation::h128_bf16) c.head_dims = {128};
    if (s->rotate == Scheme::Rotation::h32_bf16) c.head_dim_multiple = 32;
  }
}

/// Runs the engine. `config` is one of tiled_configs().
template <Bug B>
void run_tiled(const Args& a, const Plan& plan);

/// Call paths with identical per-row arithmetic: "" (direct, query tiles ascending),
/// "path=wrapper" (inputs packed into contiguous copies, query tiles descending, output staged
/// and copied out), "qtile=16" (16-row query tiles instead of the recipe's tile_q).
std::vector<std::string> tiled_configs();

/// A tiled kernel for one recipe; mutants use the same class with their Bug.
template <Bug B>
class TiledKernel final : public Kernel {
 public:
  /// `bitwise`: the declared contract (the production kernels and the `mutant.<name>`
  /// registrations claim it; `mutant.nb.<name>` registrations do not).
  TiledKernel(std::string name, std::string recipe_text, bool bitwise = true)
      : name_(std::move(name)), recipe_text_(std::move(recipe_text)), bitwise_(bitwise) {}
  std::string name() const override { return name_; }
  std::string backend() const override { return "cpu"; }
  std::vector<std::string> recipes() const override { return {recipe_label(parse_recipe(recipe_text_))}; }
  Capabilities capabilities() const override {
    Capabilities c;
    c.bitwise = bitwise_;  // `mutant.<name>` lies here: that is the point
    c.deterministic = true;
    c.planted_bug = B != Bug::none;
    declare_rotation_limits(make_plan(parse_recipe(recipe_text_)), c);
    return c;
  }
  std::vector<std::string> configs() const override { return tiled_configs(); }
  Status supports(const Problem& p, const Recipe& r) const override {
    if (auto st = Kernel::supports(p, r); !st) return st;
    const Plan plan = make_plan(r);
    if (auto why = plan_unsupported(plan); !why.empty()) return Status::unsupported(why);
    if (plan.q.family == Scheme::Family::int8 && p.head_dim > 1024)
      return Status::unsupported("INT8 logits need head_dim <= 1024 (exact int32 sums)");
    for (const Scheme* s : {&plan.q, &plan.k}) {
      if ((s->rotate == Scheme::Rotation::h128 || s->rotate == Scheme::Rotation::h128_bf16) && p.head_dim != 128)
        return Status::unsupported("the 128-channel Hadamard rotation needs head_dim 128");
      if (s->rotate == Scheme::Rotation::h32_bf16 && p.head_dim % 32 != 0)
        return Status::unsupported("rotate=h32_bf16 needs head_dim % 32 == 0");
    }
    return Status::ok();
  }
  void run(const Args& a) override {
    if (auto st = supports(a.problem, a.recipe); !st) throw Error(name_ + ": " + st.reason());
    run_tiled<B>(a, make_plan(a.recipe));
  }

 private:
  std::string name_, recipe_text_;
  bool bitwise_ = true;
};

}  // namespace attest::kernels::cpu
