#pragma once
/// The recipe emulator: a bit-exact CPU model of a recipe's arithmetic (quantize, integer or
/// exact products, FP32 accumulation in the stated order, online softmax with the recipe's exp2,
/// rescale and division policies, output rounding). It is the executable definition of every
/// Recipe field; a kernel with a bitwise contract must reproduce its output and LSE bit for bit.
/// The arithmetic contract, step by step, is in docs/recipes.md and at the top of
/// reference/src/emulate.cpp.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "attest/core/problem.hpp"
#include "attest/core/recipe.hpp"
#include "attest/core/tensor.hpp"

namespace attest::ref {

struct EmulateOptions {
  /// Process K/V tiles (and keys within a tile) in reverse order after quantization. Exact
  /// math is invariant; rounding is not: metric(emu_rev, emu) is the recipe's noise floor.
  bool reverse_kv = false;
  /// With K smoothing (k' = k - km), return the LSE of the smoothed logits as the kernel computes
  /// it, without the correction q.km * softmax_scale (Sage adds it outside the kernel).
  bool smoothed_lse = false;
  /// Run the key tiles at tile_kv / tile_kv_divisor keys (kept when the quotient would break a
  /// P.V block multiple or fall below 1). Quantization does not depend on tile_kv, so this moves
  /// only where the running max is taken, where P is rounded, and the order of the tile sums.
  int tile_kv_divisor = 1;
};

/// The floor twin (docs/gate.md "The accuracy rule"): K/V tiles and keys reversed and tiles of
/// half the recipe's tile_kv. Both are reorderings a correct kernel of the same recipe may make
/// (another tile config, another loop direction); how far they move the emulator is the floor.
inline EmulateOptions floor_twin() {
  EmulateOptions o;
  o.reverse_kv = true;
  o.tile_kv_divisor = 2;
  return o;
}

struct EmulatorOutput {
  Tensor out;  ///< float32 [B,S,H,Dv] (ragged [1,total_q,H,Dv]), values of the recipe's output format
  /// `out` before the output rounding (float32 normalised accumulator x V scale): the accuracy
  /// rule's floor is measured here, so that one output-ulp flip is not counted twice (docs/gate.md).
  Tensor out_unrounded;
  Tensor lse;  ///< float32 [B,H,S] (ragged [1,H,total_q]), natural log; -inf for fully-masked rows
  /// i32, shaped like lse: how many key tiles moved the row's running max after the first tile
  /// (each one rescales the accumulator). With rescale=conditional it shows which maxima were kept.
  Tensor rescales;
};

/// Inputs: float32 tensors in logical order q [B,S,H,D], k [B,T,Hkv,D], v [B,T,Hkv,Dv] (any
/// strides; ragged [1,total,...]). Throws attest::Error on shape mismatch or a recipe field the
/// emulator does not model (e.g. exp2=hw: no bitwise contract exists for it).
EmulatorOutput emulate(const Problem& p, const Recipe& r, const Tensor& q, const Tensor& k, const Tensor& v,
                       const EmulateOptions& opt = {});

// ---- the same emulation in two steps: quantize the whole problem once, run selected rows ----
//
// emulate() is prepare() followed by every row; a quantizer's scales may span rows, heads or the
// whole tensor (per-tensor FP8, Sage's per-block Q groups and K smoothing mean, MX blocks of V
// along tokens), so a subset of rows is emulated bit for bit only against the whole problem's
// quantized operands. Each row's arithmetic after quantization depends on nothing but its own
// row (contract at the top of emulate.cpp), hence emulate_rows' rows equal emulate()'s.

/// Rows [r0, r1) of query head h of sequence b (ragged: rows counted within sequence b).
struct RowBlock {
  std::int64_t b = 0, h = 0, r0 = 0, r1 = 0;
};

/// The quantized operands of one problem (contract step 0): element values, int8 codes, scales,
/// the K-smoothing mean (and, with it, a float copy of q for the LSE correction); a ragged batch
/// holds one quantization unit per sequence. Host memory: prepared_bytes(). Move-only.
class Prepared {
 public:
  Prepared(Prepared&&) noexcept;
  Prepared& operator=(Prepared&&) noexcept;
  ~Prepared();
  [[nodiscard]] const Problem& problem() const;
  [[nodiscard]] const Recipe& recipe() const;
  /// Bytes of host memory the operands hold.
  [[nodiscard]] std::int64_t bytes() const;
  struct Impl;

 private:
  explicit Prepared(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
  friend Prepared prepare(const Problem&, const Recipe&, const Tensor&, const Tensor&, const Tensor&);
  friend EmulatorOutput emulate_rows(const Prepared&, const std::vector<RowBlock>&, const EmulateOptions&);
  friend EmulatorOutput emulate(const Problem&, const Recipe&, const Tensor&, const Tensor&, const Tensor&,
                                const EmulateOptions&);
};

/// Quantizes q, k, v (emulate()'s inputs) under the recipe, once. Throws attest::Error where
/// emulate() would (shapes, a recipe field the emulator does not model, a quantizer's refusal).
Prepared prepare(const Problem& p, const Recipe& r, const Tensor& q, const Tensor& k, const Tensor& v);

/// The rows of `blocks`, in the given order, emulated against the prepared operands: out and
/// out_unrounded float32 [1, N, 1, Dv], lse and rescales [1, 1, N], N = sum of (r1 - r0). Row n
/// equals bit for bit the same (b, row, h) of emulate() on the whole problem with the same
/// options (the problem's mask applies; reverse_kv and tile_kv_divisor change only the key
/// order and tiles, never the quantization). Throws attest::Error for a block outside the problem.
EmulatorOutput emulate_rows(const Prepared& prepared, const std::vector<RowBlock>& blocks,
                            const EmulateOptions& opt = {});

/// Host bytes a Prepared of this problem and recipe holds (what bytes() will say), without
/// quantizing anything: per element of q, 4 (element values; 1 for int8 codes) plus 4 for the
/// float copy of q under K smoothing; per element of k, 4 (1 for int8); per element of v, 4;
/// plus the per-token / per-channel scales and MX exponents.
std::int64_t prepared_bytes(const Problem& p, const Recipe& r);

/// Why emulate() would refuse this recipe on this problem (empty: it models it), found without
/// the inputs: the recipe's fields, V's scale granularity and the quantizers' own refusals (e.g.
/// a Hadamard rotation needs head_dim 128), the latter by quantizing one token of each operand.
std::string emulate_refusal(const Problem& p, const Recipe& r);

// ---- scalar building blocks (the recipe fields exp2 and div; tested on their own) ----

/// exp2=cr: 2^x correctly rounded to float (round to nearest even), subnormal results included;
/// x <= -150 gives +0, x >= 128 gives +inf, NaN stays NaN. Evaluated in double by a degree-15
/// polynomial built from fma and rounded once; the rare inputs whose double value cannot decide
/// the rounding are settled in 166-bit arithmetic (Boost.Multiprecision). No libm.
float exp2_cr(float x);
/// True when exp2_cr(x) is decided by its double evaluation alone (for tests and statistics).
bool exp2_cr_fast_path_decides(float x);
/// exp2=fa4: the FlashAttention-4 polynomial exp2 emulation exactly as FORMATS.md gives it
/// (max(x, -127), floor split by adding 1.5*2^23 rounded toward -inf, cubic in fma, exponent
/// added to the bits). A NaN input yields the value at -127 (fmaxf drops the NaN).
float exp2_fa4(float x);
/// div=rcp_sm90: sm_90 rcp.approx.ftz.f32, bit-exact from the measured 2^23-entry table:
/// subnormal inputs act as +-0 (giving +-inf), subnormal results flush to +-0, 1/+-inf = +-0,
/// NaN gives NaN.
float rcp_sm90(float x);
/// The measured table: entry[m] = bits(rcp(x)) - bits(RN(1/x)) for x = 1.m in [1, 2).
std::span<const std::int8_t> rcp_sm90_table();
/// Size in bytes of the embedded gzip file the table is inflated from.
std::size_t rcp_sm90_table_gz_size();
/// log2 in double without libm: frexp, then a 15-term atanh series evaluated with fma (relative
/// error a few units in the last place of a double). Used for the LSE.
double log2_portable(double x);

}  // namespace attest::ref
