#pragma once
/// gpu.emu.<recipe>: device attention with a bitwise contract to the recipe emulator
/// (attest::ref::emulate, docs/recipes.md). Device-pointer entry point; the registry entries
/// (emu_kernel.cpp) prepare the operands and wrap it for host Tensors.
///
/// Division of work: stage 0 (quantization: scales, smoothing, rotation, element codes) runs on
/// the host with kernels/cpu's quantizers (bitwise equal to the emulator's; cpu.tiled checks
/// that) and is uploaded as element values with the scales factored out. Everything after it --
/// logits (exact INT8 sums, FP32 fma sums, MX block sums), the online softmax with the recipe's
/// exp2 and rescale policy, P rounding (element or MX), P.V, normalisation (ieee_div, ieee_rcp,
/// rcp_sm90), output rounding and the LSE -- runs on the device in the emulator's order.
///
/// Work: one block per (batch element, head, query tile of tile_q rows), one thread per query
/// row; each thread walks its row's KV tiles in ascending order, keys ascending, exactly as the
/// emulator's emulate_row. Accumulators live in registers for head_dim_v 64/128 without MX P.V,
/// else in a per-thread global scratch.
///
/// The emulator's other outputs from the same operands: out_round = false gives
/// EmulatorOutput::out_unrounded; reverse_kv = true with tile_kv = twin_tile_kv(recipe)
/// (emu_host.hpp) gives emulate(..., floor_twin()) (tiles, keys and P.V blocks descending; the
/// tile max is order-free). A smaller tile_kv needs no more scratch than emu_scratch_floats gave.
#include <cstdint>

#include "attest/kernels/gpu/emu_math.hpp"

namespace attest::gpu {

/// Per batch element: where its rows live in the concatenated operand arrays. Arrays are per
/// quantization unit (dense: one unit, slab = b * heads + h; ragged: one unit per sequence,
/// slab = h), concatenated; "rows" are token rows of C channels.
struct EmuBatch {
  std::int64_t len_q = 0, len_kv = 0;  ///< this element's sequence lengths
  std::int64_t tq = 0, tk = 0;         ///< the unit's token counts (slab strides)
  std::int64_t q_row0 = 0;             ///< row of (slab of head 0, token 0) of Q (and qraw, qts, qexp rows)
  std::int64_t k_row0 = 0;             ///< row of (slab of kv head 0, token 0) of K and V
  std::int64_t kv_slab0 = 0;           ///< global slab index of kv head 0 (V scales, K means)
  std::int64_t vexp0 = 0;              ///< offset of kv head 0's V block exponents
  std::int64_t out_row0 = 0;           ///< output token row of query 0 (ragged: cu_seqlens_q[b])
};

/// One block's work item.
struct EmuItem {
  std::int64_t b = 0, h = 0, r0 = 0, r1 = 0;
};

enum class EmuLogits : int { fp32 = 0, int8 = 1, mx = 2 };
enum class EmuP : int { f32 = 0, elem = 1, mx = 2 };
enum class EmuDiv : int { ieee_div = 0, ieee_rcp = 1, rcp_sm90 = 2 };
inline constexpr std::int16_t kEmuNanExp = 0x7FFF;  ///< a NaN E8M0 scale in a block exponent

struct EmuParams {
  // Problem.
  std::int64_t heads_q = 1, heads_kv = 1, head_dim = 0, head_dim_v = 0, group = 1;
  int mask = 0;  ///< 0 none, 1 causal_tl, 2 causal_br
  std::int64_t tile_kv = 64;
  /// EmulateOptions::reverse_kv: KV tiles descending, keys (P.V: blocks, then keys) descending
  /// within a tile, row sum in the same order; same tiles, same quantization.
  bool reverse_kv = false;
  const EmuBatch* batches = nullptr;  ///< device
  const EmuItem* items = nullptr;     ///< device
  std::int64_t n_items = 0;
  int block_threads = 64;  ///< threads per block (>= the largest item's rows is not required)

  // Operands (device; see EmuBatch for the indexing).
  EmuLogits logits = EmuLogits::fp32;
  const float* qv = nullptr;          ///< Q element values [row][D]
  const float* kv = nullptr;          ///< K element values [row][D]
  const float* vv = nullptr;          ///< V element values [row][Dv]
  const std::int8_t* qi = nullptr;    ///< INT8 codes (logits == int8)
  const std::int8_t* ki = nullptr;
  const float* qts = nullptr;         ///< per-token scales [row]
  const float* kts = nullptr;
  const float* vcs = nullptr;         ///< V per-channel scales [slab][Dv]
  const std::int16_t* qexp = nullptr; ///< MX Q/K block exponents [row][nb] (E - 127)
  const std::int16_t* kexp = nullptr;
  std::int64_t qk_block = 32;         ///< MX channels per scale
  const std::int16_t* vexp = nullptr; ///< MX V exponents [slab][t / vblock][Dv], or nullptr
  std::int64_t vblock = 32;
  const float* km = nullptr;          ///< K smoothing means [slab][D], or nullptr
  const float* qraw = nullptr;        ///< unquantized Q [row][D] (with km)
  double sm_scale = 0;

  // Recipe.
  float c = 1, off = 0;
  bool rescale_conditional = false;
  float neg_threshold = 0;  ///< fl32(-rescale_threshold)
  bool exp2_fa4 = false;
  double exp2c[16] = {};    ///< exp2=cr coefficients (exp2_cr_coefficients())
  EmuP p = EmuP::elem;
  FormatSpec p_fmt = format_spec(FormatId::bf16);  ///< P's element format (a row of core's table)
  emu::Rounding p_tie = emu::Rounding::rne;
  emu::Overflow p_sat = emu::Overflow::sat_cuda;
  emu::E8M0Rule p_e8m0 = emu::E8M0Rule::floor;  ///< MX P: scale rule (floor, ceil, aiter_hip_fp4)
  int p_emax = 0;                                ///< MX P: element emax
  std::int64_t pv_block = 32;                ///< keys per P.V block with MX P or V
  EmuDiv div = EmuDiv::ieee_div;
  bool vscale_rcp = false;
  /// false: O left unrounded (the emulator's out_unrounded).
  bool out_round = true;
  FormatSpec out_fmt = format_spec(FormatId::bf16);  ///< O's format (a row of core's table)
  emu::Overflow out_sat = emu::Overflow::ieee;

  // Outputs (device, contiguous): out [out_row][heads_q][Dv], lse [heads_q][total_rows].
  float* out = nullptr;
  float* lse = nullptr;
  std::int64_t total_rows = 0;
  float* scratch = nullptr;          ///< per-thread scratch, scratch_floats(...) floats
  unsigned* undecided = nullptr;     ///< set to 1 if an exp2_cr input could not be decided
};

/// exp2=cr's coefficients ln2^k / k!, k = 0..15, rounded once to double (computed as the
/// emulator does, in 166-bit arithmetic; emu_kernel.cpp).
const double* exp2_cr_coefficients();

/// Floats of per-thread scratch the launch needs.
std::int64_t emu_scratch_floats(const EmuParams& p);
/// True when this build can execute div=rcp_sm90 bitwise (NVIDIA: the hardware instruction).
bool emu_has_rcp_sm90();
/// Launches on `stream` (hipStream_t; nullptr = default). Asynchronous.
void attn_fwd_emu(const EmuParams& p, void* stream = nullptr);

}  // namespace attest::gpu
