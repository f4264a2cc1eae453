// cpu.tiled.<recipe> for the int8_fp8 family: INT8 Q/K with FP8 P and V (SageAttention2 per
// block, per warp, per thread), on the tiled engine.
#include "cpu/attn_fwd_tiled.hpp"

namespace attest::kernels::cpu {
namespace {

ATTEST_REGISTER_KERNELS([] {
  std::vector<std::unique_ptr<Kernel>> v;
  for (const char* r : {"sage_int8_fp8_perblock", "sage_int8_fp8_perwarp", "sage_int8_fp8_perthread"})
    v.push_back(std::make_unique<TiledKernel<Bug::none>>(std::string("cpu.tiled.") + r, r));
  return v;
});

}  // namespace
}  // namespace attest::kernels::cpu
