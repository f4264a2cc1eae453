// Mutants: the tiled engine with one planted bug each (Bug in attn_fwd_tiled.hpp), registered
// in test builds only. They exist to prove that the checks catch real bugs. Each declaration
// below is registered twice, with the recipe it claims and otherwise honest capabilities:
//   mutant.<name>     declares a bitwise contract (a lie): the bitwise check alone can catch it;
//   mutant.nb.<name>  declares none, like every real kernel: only the numerical and memory
//                     checks can (conformance/tests/test_mutation.cpp scores both).
#include "cpu/attn_fwd_tiled_impl.hpp"

namespace attest::kernels::cpu {
namespace {

constexpr const char* kSageVDirect =
    "q=int8:per_block=128:round=half:prescale=sm_log2e;k=int8:per_block=64:round=half:smooth=bf16;"
    "v=fp8_e4m3fn:per_tensor:scale=none:apply=div;p=fp8_e4m3fn;pscale=offset_8807;div=rcp_sm90;tile_q=64;"
    "tile_kv=128;out=bf16";

using Make = std::unique_ptr<Kernel> (*)(std::string name, const char* recipe, bool bitwise);

template <Bug B>
std::unique_ptr<Kernel> make(std::string name, const char* recipe, bool bitwise) {
  return std::make_unique<TiledKernel<B>>(std::move(name), recipe, bitwise);
}

struct Mutant {
  Make make;
  const char* name;
  const char* recipe;  ///< the recipe it claims (named recipe or recipe text)
};

// The catalogue: one line per planted bug (docs/gate.md "Mutants" has the table).
constexpr Mutant kMutants[] = {
    // A row's last KV tile is dropped when partial (T % tile_kv != 0): keys go missing.
    {make<Bug::skip_last_kv_tile>, "skip_last_kv_tile", "bf16"},
    // Softmax scale 1% too large: every probability is slightly sharper.
    {make<Bug::scale_off_1pct>, "scale_off_1pct", "bf16"},
    // Accumulator and sum are not rescaled when the running max grows across KV tiles.
    {make<Bug::no_rescale>, "no_rescale", "bf16"},
    // causal_br problems are masked top-left: wrong whenever S != T.
    {make<Bug::causal_tl_for_br>, "causal_tl_for_br", "bf16"},
    // GQA head mapping h % Hkv instead of h / (H / Hkv), for K and V.
    {make<Bug::gqa_wrong_head>, "gqa_wrong_head", "bf16"},
    // LSE written in log2 units instead of natural log.
    {make<Bug::lse_log2>, "lse_log2", "bf16"},
    // The last partial query tile (S % tile_q != 0) is never computed nor written.
    {make<Bug::skip_last_q_tile>, "skip_last_q_tile", "bf16"},
    // Writes 1.0f one element past the output's last element (into the buffer's slack only).
    {make<Bug::oob_write>, "oob_write", "bf16"},
    // Ignores strides: reads inputs and writes the output as contiguous bshd.
    {make<Bug::contiguous_assumed>, "contiguous_assumed", "bf16"},
    // Reads V with the dense strides of the problem's layout (as if q, k, v shared one): wrong
    // only when V alone is a view (a KV-cache slice, a transposed buffer).
    {make<Bug::ignores_v_strides>, "ignores_v_strides", "bf16"},
    // Row sum and P.V inside a KV tile start at a key that rotates with every call.
    {make<Bug::nondeterministic>, "nondeterministic", "bf16"},
    // The FP32 accumulator is flushed to zero when it becomes subnormal.
    {make<Bug::ftz_acc>, "ftz_acc", "bf16"},
    // Sage INT8 Q/K converted by truncation toward zero instead of rounding half away.
    {make<Bug::int8_trunc>, "int8_trunc", "sage_int8_fp8_perblock"},
    // K smoothed by each token's mean over channels instead of each channel's mean over tokens
    // (the per-channel shift is exact in softmax; a per-token one is not).
    {make<Bug::smooth_per_token>, "smooth_per_token", "sage_int8_fp8_perblock"},
    // P cast to e5m2 instead of the recipe's e4m3 before P.V.
    {make<Bug::p_e5m2>, "p_e5m2", "sage_int8_fp8_perblock"},
    // FP8 V cast with IEEE overflow instead of saturation: outliers beyond 448 become NaN. It claims
    // the Sage recipe with V cast directly (descale 1, saturating), where saturation matters.
    {make<Bug::fp8_v_nosat>, "fp8_v_nosat", kSageVDirect},
    // P = exp2(logit * c) with the max pinned at 0: equal in exact arithmetic, overflows to Inf
    // (NaN after the division) once a logit exceeds 128 in log2 units.
    {make<Bug::no_max_sub>, "no_max_sub", "bf16"},
    // Causal masks drop the diagonal key (`j < i` for `j <= i`); row 0 of causal_tl sees nothing.
    {make<Bug::causal_diag_off>, "causal_diag_off", "bf16"},
    // K and V passed in each other's place (only possible when head_dim == head_dim_v).
    {make<Bug::kv_swapped>, "kv_swapped", "bf16"},
    // GQA: K uses KV head h / (H / Hkv) but V uses h % Hkv (wrong V rows for H/Hkv >= 2, Hkv >= 2).
    {make<Bug::v_head_mixup>, "v_head_mixup", "bf16"},
    // Q/K per_block quantizer writes one scale per block/2 tokens; the kernel reads one per block.
    {make<Bug::qblock_mismatch>, "qblock_mismatch", "sage_int8_fp8_perblock"},
    // MXFP4 Q/K (and V) scales by the OCP floor rule instead of AITER's round-up rule: the block's
    // largest elements saturate at 6 (up to 25% clipping).
    {make<Bug::e8m0_floor>, "e8m0_floor", "mxfp4_fp8"},
    // MXFP6 Q/K block exponents decoded with bias 128: every Q and K value halved, logits / 4.
    {make<Bug::e8m0_bias>, "e8m0_bias", "mxfp6_fp8"},
    // FA4 exp2 emulation with n = trunc(x): the cubic evaluated on (-1, 0], about 1% off.
    {make<Bug::fa4_exp2_trunc>, "fa4_exp2_trunc", "bf16_fa4"},
    // FA4 conditional rescale threshold 8 read as a ratio (2^8 = 256 log2 units): the old max is
    // kept while the row max grows up to 256, so P overflows beyond 2^128.
    {make<Bug::fa4_threshold_ratio>, "fa4_threshold_ratio", "bf16_fa4"},
    // Sage: the LSE misses the K-smoothing correction q . mean(K) * scale.
    {make<Bug::sage_lse_no_smooth>, "sage_lse_no_smooth", "sage_int8_fp8_perblock"},
    // Sage: O not multiplied by V's per-channel FP8 descale.
    {make<Bug::v_descale_missing>, "v_descale_missing", "sage_int8_fp8_perblock"},
    // FP8 (FA3): V's per-tensor descale applied once more after the epilogue.
    {make<Bug::v_descale_twice>, "v_descale_twice", "fp8_fp8"},
    // Ragged: K/V rows of sequence b addressed from cu_seqlens_q[b] instead of cu_seqlens_kv[b].
    {make<Bug::cu_kv_from_q>, "cu_kv_from_q", "bf16"},
    // Default softmax scale from head_dim_v: wrong whenever head_dim_v != head_dim.
    {make<Bug::scale_from_dv>, "scale_from_dv", "bf16"},
    // The first KV tile of a row is skipped (loop starts at tile 1) when the row has several.
    {make<Bug::drop_first_kv_tile>, "drop_first_kv_tile", "bf16"},
    // The second KV tile of a row is skipped when the row has three or more.
    {make<Bug::drop_middle_kv_tile>, "drop_middle_kv_tile", "bf16"},
};

ATTEST_REGISTER_KERNELS([] {
  std::vector<std::unique_ptr<Kernel>> v;
  for (const Mutant& m : kMutants) {
    v.push_back(m.make(std::string("mutant.") + m.name, m.recipe, true));
    v.push_back(m.make(std::string("mutant.nb.") + m.name, m.recipe, false));
  }
  return v;
});

}  // namespace
}  // namespace attest::kernels::cpu
