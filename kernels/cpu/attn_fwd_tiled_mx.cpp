// cpu.tiled.<recipe> for the mx family: MXFP6/MXFP4 Q/K (optionally Hadamard-rotated) with FP8
// or MXFP4 P and V (AITER mha_v4), on the tiled engine.
#include "cpu/attn_fwd_tiled.hpp"

namespace attest::kernels::cpu {
namespace {

ATTEST_REGISTER_KERNELS([] {
  std::vector<std::unique_ptr<Kernel>> v;
  for (const char* r : {"mxfp6_fp8", "mxfp4_fp8", "mxfp6_fp4", "mxfp4_fp4", "mxfp6_fp8_had", "mxfp4_fp8_had",
                        "mxfp6_fp4_had", "mxfp4_fp4_had"})
    v.push_back(std::make_unique<TiledKernel<Bug::none>>(std::string("cpu.tiled.") + r, r));
  return v;
});

}  // namespace
}  // namespace attest::kernels::cpu
