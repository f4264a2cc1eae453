#pragma once
/// Host side of gpu.emu.<recipe> (emu_kernel.cpp): stage 0 (quantization with kernels/cpu's
/// quantizers) and the upload, separated from the launch so that benchmarks time the device
/// stage alone. Plain C++ (no device headers).
#include <vector>

#include "attest/core/problem.hpp"
#include "attest/core/recipe.hpp"
#include "attest/core/tensor.hpp"
#include "attest/kernels/gpu/attn_fwd_emu.hpp"
#include "attest/kernels/gpu/device.hpp"

namespace attest::gpu {

/// Everything one launch reads and writes, on the device.
struct EmuRun {
  EmuParams params;                  ///< ready for attn_fwd_emu
  std::vector<EmuBatch> batches;     ///< host copy (output rows of each batch element)
  std::vector<DeviceBuffer> buffers; ///< owners of every device pointer in params
};

/// Quantizes q/k/v (logical [B|1, tokens, heads, C] f32 tensors, any strides) on the host and
/// uploads them; allocates outputs and scratch. Throws attest::Error for an unsupported recipe.
EmuRun emu_prepare(const Problem& p, const Recipe& r, const Tensor& q, const Tensor& k, const Tensor& v);
/// After the launch has finished: the contiguous out [rows][H][Dv] and lse [H][rows]. Throws
/// attest::Error if an exp2=cr argument could not be decided (nothing is returned then).
void emu_collect(const EmuRun& run, std::vector<float>& out, std::vector<float>& lse);

}  // namespace attest::gpu
