// Mutants: the tiled engine with one planted bug each (Bug in attn_fwd_tiled.hpp), registered
// in test builds only. Each declares the recipe it claims and a bitwise contract (a lie), and is
// otherwise honest about its capabilities. They exist to prove that the checks catch real bugs.
#include "cpu/attn_fwd_tiled_impl.hpp"

namespace attest::kernels::cpu {
namespace {

constexpr const char* kSageVDirect =
    "q=int8:per_block=128:round=half:prescale=sm_log2e;k=int8:per_block=64:round=half:smooth=bf16;"
    "v=fp8_e4m3fn:per_tensor:scale=none:apply=div;p=fp8_e4m3fn;pscale=offset_8807;div=rcp_sm90;tile_q=64;"
    "tile_kv=128;out=bf16";

template <Bug B>
std::unique_ptr<Kernel> mutant(const char* name, const char* recipe) {
  return std::make_unique<TiledKernel<B>>(std::string("mutant.") + name, recipe);
}

ATTEST_REGISTER_KERNELS([] {
  std::vector<std::unique_ptr<Kernel>> v;
  // A row's last KV tile is dropped when partial (T % tile_kv != 0): keys go missing.
  v.push_back(mutant<Bug::skip_last_kv_tile>("skip_last_kv_tile", "bf16"));
  // Softmax scale 1% too large: every probability is slightly sharper.
  v.push_back(mutant<Bug::scale_off_1pct>("scale_off_1pct", "bf16"));
  // Accumulator and sum are not rescaled when the running max grows across KV tiles.
  v.push_back(mutant<Bug::no_rescale>("no_rescale", "bf16"));
  // causal_br problems are masked top-left: wrong whenever S != T.
  v.push_back(mutant<Bug::causal_tl_for_br>("causal_tl_for_br", "bf16"));
  // GQA head mapping h % Hkv instead of h / (H / Hkv).
  v.push_back(mutant<Bug::gqa_wrong_head>("gqa_wrong_head", "bf16"));
  // LSE written in log2 units instead of natural log.
  v.push_back(mutant<Bug::lse_log2>("lse_log2", "bf16"));
  // The last partial query tile (S % tile_q != 0) is never computed nor written.
  v.push_back(mutant<Bug::skip_last_q_tile>("skip_last_q_tile", "bf16"));
  // Writes 1.0f one element past the output's last element (into the buffer's slack only).
  v.push_back(mutant<Bug::oob_write>("oob_write", "bf16"));
  // Ignores strides: reads inputs and writes the output as contiguous bshd.
  v.push_back(mutant<Bug::contiguous_assumed>("contiguous_assumed", "bf16"));
  // Row sum and P.V inside a KV tile start at a key that rotates with every call.
  v.push_back(mutant<Bug::nondeterministic>("nondeterministic", "bf16"));
  // The FP32 accumulator is flushed to zero when it becomes subnormal.
  v.push_back(mutant<Bug::ftz_acc>("ftz_acc", "bf16"));
  // Sage INT8 Q/K converted by truncation toward zero instead of rounding half away.
  v.push_back(mutant<Bug::int8_trunc>("int8_trunc", "sage_int8_fp8_perblock"));
  // K smoothed by each token's mean over channels instead of each channel's mean over tokens
  // (the per-channel shift is exact in softmax; a per-token one is not).
  v.push_back(mutant<Bug::smooth_per_token>("smooth_per_token", "sage_int8_fp8_perblock"));
  // P cast to e5m2 instead of the recipe's e4m3 before P.V.
  v.push_back(mutant<Bug::p_e5m2>("p_e5m2", "sage_int8_fp8_perblock"));
  // FP8 V cast with IEEE overflow instead of saturation: outliers beyond 448 become NaN. It claims
  // the Sage recipe with V cast directly (descale 1, saturating), where saturation matters.
  v.push_back(mutant<Bug::fp8_v_nosat>("fp8_v_nosat", kSageVDirect));
  return v;
});

}  // namespace
}  // namespace attest::kernels::cpu
