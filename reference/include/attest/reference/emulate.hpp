#pragma once
/// The recipe emulator: a bit-exact CPU model of a recipe's arithmetic (quantize, integer or
/// exact products, FP32 accumulation in the stated order, online softmax with the recipe's exp2,
/// rescale and division policies, output rounding). It is the executable definition of every
/// Recipe field; a kernel with a bitwise contract must reproduce its output and LSE bit for bit.
#include "attest/core/problem.hpp"
#include "attest/core/recipe.hpp"
#include "attest/core/tensor.hpp"

namespace attest::ref {

struct EmulateOptions {
  /// Process K/V tiles (and keys within a tile) in reverse order after quantization. Exact
  /// math is invariant; rounding is not: metric(emu_rev, emu) is the recipe's noise floor.
  bool reverse_kv = false;
};

struct EmulatorOutput {
  Tensor out;  ///< float32 [B,S,H,Dv] (ragged [1,total_q,H,Dv]), values of the recipe's output format
  Tensor lse;  ///< float32 [B,H,S] (ragged [1,H,total_q]), natural log; -inf for fully-masked rows
};

/// Inputs: float32 tensors in logical order q [B,S,H,D], k [B,T,Hkv,D], v [B,T,Hkv,Dv] (any
/// strides; ragged [1,total,...]). Throws attest::Error on shape mismatch or a recipe field the
/// emulator does not model (e.g. exp2=hw: no bitwise contract exists for it).
EmulatorOutput emulate(const Problem& p, const Recipe& r, const Tensor& q, const Tensor& k, const Tensor& v,
                       const EmulateOptions& opt = {});

}  // namespace attest::ref
