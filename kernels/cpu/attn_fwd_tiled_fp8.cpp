// cpu.tiled.<recipe> for the fp8 family: FP8 Q/K/V/P with per-tensor scales (FlashAttention-3
// OCP, CK/AITER FNUZ), on the tiled engine.
#include "cpu/attn_fwd_tiled.hpp"

namespace attest::kernels::cpu {
namespace {

ATTEST_REGISTER_KERNELS([] {
  std::vector<std::unique_ptr<Kernel>> v;
  for (const char* r : {"fp8_fp8", "fp8_fp8_fnuz"})
    v.push_back(std::make_unique<TiledKernel<Bug::none>>(std::string("cpu.tiled.") + r, r));
  return v;
});

}  // namespace
}  // namespace attest::kernels::cpu
