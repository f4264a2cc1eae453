// cpu.tiled.bf16 and cpu.tiled.fp16: 16-bit float recipes (Q, K, V and P rounded to the input
// dtype, FP32 accumulation, output rounded to the dtype), on the tiled engine.
#include "cpu/attn_fwd_tiled.hpp"

namespace attest::kernels::cpu {
namespace {

ATTEST_REGISTER_KERNELS([] {
  std::vector<std::unique_ptr<Kernel>> v;
  for (const char* r : {"bf16", "fp16"}) v.push_back(std::make_unique<TiledKernel<Bug::none>>(std::string("cpu.tiled.") + r, r));
  return v;
});

}  // namespace
}  // namespace attest::kernels::cpu
