// cpu.tiled.{bf16, fp16, bf16_fa4, f32}: float recipes (Q, K, V and P rounded to the input dtype
// or kept in f32, FP32 accumulation), on the tiled engine.
#include "cpu/attn_fwd_tiled.hpp"

namespace attest::kernels::cpu {
namespace {

ATTEST_REGISTER_KERNELS([] {
  std::vector<std::unique_ptr<Kernel>> v;
  for (const char* r : {"bf16", "fp16", "bf16_fa4", "f32"})
    v.push_back(std::make_unique<TiledKernel<Bug::none>>(std::string("cpu.tiled.") + r, r));
  return v;
});

}  // namespace
}  // namespace attest::kernels::cpu
