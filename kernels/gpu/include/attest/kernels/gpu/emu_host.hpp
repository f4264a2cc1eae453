#pragma once
/// Host side of gpu.emu.<recipe> (emu_host.cpp): stage 0 (quantization with kernels/cpu's
/// quantizers) and the operand arrays and parameters of one launch, in host memory. Plain C++.
#include <cstdint>
#include <string>
#include <vector>

#include "attest/core/problem.hpp"
#include "attest/core/recipe.hpp"
#include "attest/core/tensor.hpp"
#include "attest/kernels/gpu/attn_fwd_emu.hpp"

namespace attest::gpu {

/// Operand arrays (EmuBatch indexing) and the launch parameters; the pointers in `params` are
/// unset (the caller points them at device or, in the host simulation, host copies).
struct EmuHost {
  EmuParams params;
  std::vector<EmuBatch> batches;
  std::vector<EmuItem> items;
  std::vector<float> qval, kval, vval, qts, kts, vcs, km, qraw;
  std::vector<std::int8_t> qi, ki;
  std::vector<std::int16_t> qexp, kexp, vexp;
};

/// Why gpu.emu cannot run (p, r) on any device, or empty (device-specific limits, such as
/// rcp_sm90 off NVIDIA, are the registry entry's).
std::string emu_unsupported(const Problem& p, const Recipe& r);
/// EmuParams::tile_kv of the emulator run with EmulateOptions::tile_kv_divisor `divisor`:
/// tile_kv / divisor, kept only when divisor > 1, the quotient is >= 1 and, with MX P or MX V, a
/// multiple of the P.V block; else the recipe's tile_kv (reference/src/emulate.cpp make_plan's
/// rule, restated here: kernels/ does not include reference/).
std::int64_t emu_tile_kv(const Recipe& r, int divisor);
/// The floor twin's tile_kv (ref::floor_twin(): tile_kv_divisor 2; set reverse_kv too).
std::int64_t twin_tile_kv(const Recipe& r);
/// Stage 0 for logical [B|1, tokens, heads, C] f32 tensors (any strides). Throws attest::Error
/// for an unsupported recipe.
EmuHost emu_prepare_host(const Problem& p, const Recipe& r, const Tensor& q, const Tensor& k, const Tensor& v);

}  // namespace attest::gpu
