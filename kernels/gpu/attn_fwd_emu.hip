// gpu.emu.<recipe> device code: the emulator's per-row arithmetic (reference/src/emulate.cpp
// emulate_row), one thread per query row. Contract in attest/kernels/gpu/attn_fwd_emu.hpp.
// Every FP32 operation below is one IEEE operation in source order: device code is compiled
// with --fmad=false / -ffp-contract=off, fused multiply-adds are written fmaf, and division and
// reciprocal use the explicitly rounded intrinsics on NVIDIA.
#include "attest/kernels/gpu/attn_fwd_emu.hpp"
#include "attest/kernels/gpu/emu_row.hpp"

#include <string>

#include "runtime.hpp"

namespace attest::gpu {
namespace {

using i64 = std::int64_t;
using namespace emu_impl;

// The host side launches at most 128 threads (emu_host.cpp: min(tile_q, 128)). Saying so lets the
// AMD backend give a thread up to 512 VGPRs (gfx942/gfx950) instead of the 128 that the default
// bound of 1024 threads leaves, where the register accumulators of emu_kernel<64/128> spilled
// (docs/results/amd-isa/). nvcc's 255-register limit is the same either way.
constexpr int kEmuMaxThreads = 128;

template <int DV>
__global__ void __launch_bounds__(kEmuMaxThreads) emu_kernel(EmuParams p) {
  const EmuItem it = p.items[blockIdx.x];
  const EmuBatch bt = p.batches[it.b];
  const i64 ns = static_cast<i64>(gridDim.x) * blockDim.x;
  float* scr = p.scratch + static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (i64 i = it.r0 + threadIdx.x; i < it.r1; i += blockDim.x) emu_row<DV>(p, bt, it.h, i, scr, ns);
}

int register_dv(const EmuParams& p) {
  if (p.p == EmuP::mx || p.vexp != nullptr) return 0;
  return p.head_dim_v == 64 || p.head_dim_v == 128 ? static_cast<int>(p.head_dim_v) : 0;
}

}  // namespace

std::int64_t emu_scratch_floats(const EmuParams& p) {
  const std::int64_t slots = 3 * p.tile_kv + (register_dv(p) > 0 ? 0 : 2 * p.head_dim_v);
  return slots * p.n_items * p.block_threads;
}

bool emu_has_rcp_sm90() {
#if defined(ATTEST_GPU_NVIDIA)
  return true;
#else
  return false;
#endif
}

void attn_fwd_emu(const EmuParams& p, void* stream) {
  if (p.n_items == 0) return;
  if (p.n_items > 2147483647 || p.block_threads < 1 || p.block_threads > kEmuMaxThreads)
    throw Error("attn_fwd_emu: " + std::to_string(p.n_items) + " work items of " + std::to_string(p.block_threads) +
                " threads exceed one launch (at most " + std::to_string(kEmuMaxThreads) + " threads)");
  const auto st = static_cast<hipStream_t>(stream);
  const dim3 grid(static_cast<unsigned>(p.n_items));
  const dim3 block(static_cast<unsigned>(p.block_threads));
  switch (register_dv(p)) {
    case 64: emu_kernel<64><<<grid, block, 0, st>>>(p); break;
    case 128: emu_kernel<128><<<grid, block, 0, st>>>(p); break;
    default: emu_kernel<0><<<grid, block, 0, st>>>(p); break;
  }
  ATTEST_GPU_CHECK_LAUNCH();
}

}  // namespace attest::gpu
