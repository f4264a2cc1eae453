#pragma once
/// Host side of gpu.emu.<recipe> (emu_kernel.cpp): stage 0 (quantization with kernels/cpu's
/// quantizers) and the upload, separated from the launch so that benchmarks time the device
/// stage alone. Plain C++ (no device headers).
#include <cstdint>
#include <string>
#include <vector>

#include "attest/core/problem.hpp"
#include "attest/core/recipe.hpp"
#include "attest/core/tensor.hpp"
#include "attest/kernels/gpu/attn_fwd_emu.hpp"
#include "attest/kernels/gpu/device.hpp"
#include "attest/kernels/gpu/emu_host.hpp"

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
/// emu_prepare's second half (emu_upload.cpp, in attest_gpu): uploads the operand arrays of `hs`
/// and allocates the outputs and the scratch of hs.params.n_items items.
EmuRun emu_upload(const EmuHost& hs);

/// gpu.emu's host stage (emu_host.cpp, kernels/cpu's quantizers) for code that links attest_gpu
/// but not the gpu_emu kernel group (the conformance engine, engine.cpp): the group fills it in
/// when it is linked into the program (emu_kernel.cpp's registration); unset (nullptr) otherwise.
struct EmuHostStage {
  std::string (*unsupported)(const Problem&, const Recipe&) = nullptr;  ///< the registry entry's, device limits included
  EmuHost (*prepare)(const Problem&, const Recipe&, const Tensor&, const Tensor&, const Tensor&) = nullptr;
  std::int64_t (*twin_tile_kv)(const Recipe&) = nullptr;
};
EmuHostStage& emu_host_stage();
/// After the launch has finished: the contiguous out [rows][H][Dv] and lse [H][rows]. Throws
/// attest::Error if an exp2=cr argument could not be decided (nothing is returned then).
void emu_collect(const EmuRun& run, std::vector<float>& out, std::vector<float>& lse);

}  // namespace attest::gpu
