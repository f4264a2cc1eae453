// gpu.emu.<recipe>: registry entries of the device recipe kernels (attn_fwd_emu.hip), one per
// named recipe, each with a bitwise contract to the recipe emulator.
//
// Stage 0 (quantization) runs here on the host with kernels/cpu's quantizers, which cpu.tiled
// already proves bitwise equal to the emulator's; the element values, scales and block
// exponents go to the device, where everything after quantization runs in the emulator's order.
// Moving stage 0 onto the device (the standalone device quantizers) is future work: it changes
// where the bits are made, not the bits.
#include <algorithm>
#include <array>
#include <cmath>
#include <memory>
#include <vector>

#include "attest/core/recipe.hpp"
#include "attest/kernels/gpu/attn_fwd_emu.hpp"
#include "attest/kernels/gpu/device.hpp"
#include "attest/kernels/gpu/emu_host.hpp"
#include "attest/kernels/gpu/emu_prepare.hpp"
#include "cpu/attn_fwd_tiled.hpp"
#include "attest/kernels/kernel.hpp"
#include "cpu/attn_fwd_tiled.hpp"
#include "cpu/cpu_io.hpp"
#include "cpu/cpu_quantize.hpp"


namespace attest::kernels::gpu_emu {
namespace {

using std::int64_t;

// Why this entry cannot run (p, r), or empty.
std::string unsupported(const Problem& p, const Recipe& r) {
  if (auto why = gpu::emu_unsupported(p, r); !why.empty()) return why;
  if (r.div == DivisionOp::rcp_sm90 && !gpu::emu_has_rcp_sm90())
    return "div=rcp_sm90 is exact only with NVIDIA's rcp.approx.ftz.f32 (the measured table is not loaded on other targets)";
  return {};
}

class EmuKernel final : public Kernel {
 public:
  EmuKernel(std::string recipe_name) : recipe_name_(std::move(recipe_name)) {}
  std::string name() const override { return "gpu.emu." + recipe_name_; }
  std::string backend() const override { return gpu::backend_name(); }
  std::vector<std::string> recipes() const override { return {recipe_label(parse_recipe(recipe_name_))}; }
  Capabilities capabilities() const override {
    Capabilities c;
    c.bitwise = true;
    c.deterministic = true;      // fixed per-row order, no atomics
    c.graph_capturable = false;  // host Tensors, host quantization
    cpu::declare_rotation_limits(cpu::make_plan(parse_recipe(recipe_name_)), c);
    if (gpu::device_count() == 0) c.unavailable = "no GPU device (or no driver) on this host";
    return c;
  }
  Status supports(const Problem& p, const Recipe& r) const override {
    if (auto st = Kernel::supports(p, r); !st) return st;
    if (auto why = unsupported(p, r); !why.empty()) return Status::unsupported(why);
    return Status::ok();
  }
  void run(const Args& a) override;

 private:
  std::string recipe_name_;
};

}  // namespace
}  // namespace attest::kernels::gpu_emu

namespace attest::gpu {

EmuRun emu_prepare(const Problem& p, const Recipe& r, const Tensor& tq, const Tensor& tk, const Tensor& tv) {
  return emu_upload(emu_prepare_host(p, r, tq, tk, tv));
}

void emu_collect(const EmuRun& run, std::vector<float>& out, std::vector<float>& lse) {
  const EmuParams& ep = run.params;
  auto download = [&](const void* dev, void* host, std::size_t bytes) {
    for (const DeviceBuffer& b : run.buffers)
      if (b.data() == dev) return b.download(host, bytes);
    throw Error("gpu.emu: internal: no buffer owns a device pointer of the run");
  };
  unsigned undecided = 0;
  download(ep.undecided, &undecided, sizeof undecided);
  if (undecided != 0)
    throw Error("gpu.emu: an exp2=cr argument lay too close to a float rounding boundary for the device's "
                "double-double evaluation; no result is written");
  out.assign(static_cast<std::size_t>(ep.total_rows * ep.heads_q * ep.head_dim_v), 0.0f);
  lse.assign(static_cast<std::size_t>(ep.heads_q * ep.total_rows), 0.0f);
  if (!out.empty()) download(ep.out, out.data(), out.size() * 4);
  if (!lse.empty()) download(ep.lse, lse.data(), lse.size() * 4);
}

}  // namespace attest::gpu

namespace attest::kernels::gpu_emu {
namespace {

void EmuKernel::run(const Args& a) {
  const Problem& p = a.problem;
  const Recipe& r = a.recipe;
  if (auto st = supports(p, r); !st) throw Error(name() + ": " + st.reason());
  if (!a.config.empty()) throw Error(name() + ": unknown config '" + std::string(a.config) + "' (valid: \"\")");
  cpu::check_args(p, a.q, a.k, a.v, a.out, a.lse);
  const gpu::EmuRun prep = gpu::emu_prepare(p, r, a.q, a.k, a.v);
  std::vector<float> out_h, lse_h;
  if (prep.params.n_items > 0) {
    gpu::attn_fwd_emu(prep.params);
    gpu::synchronize();
    gpu::emu_collect(prep, out_h, lse_h);
  }
  const int64_t H = p.heads_q, Dv = p.head_dim_v, total_rows = prep.params.total_rows;
  const auto& batches = prep.batches;
  // Scatter into the caller's tensors through their strides (bytes the kernel does not own stay).
  const auto o = cpu::token_view<float>(a.out, p, false);
  cpu::LseView lv;
  if (a.lse != nullptr) lv = cpu::lse_view(*a.lse, p);
  for (int64_t b = 0; b < p.batch; ++b) {
    const int64_t row0 = batches[static_cast<std::size_t>(b)].out_row0;
    for (int64_t i = 0; i < p.len_q(b); ++i)
      for (int64_t h = 0; h < H; ++h) {
        const float* src = out_h.data() + ((row0 + i) * H + h) * Dv;
        float* dst = o.row(b, i, h);
        for (int64_t d = 0; d < Dv; ++d) dst[d * o.sd] = src[d];
        if (a.lse != nullptr) lv.at(b, h, i) = lse_h[static_cast<std::size_t>(h * total_rows + row0 + i)];
      }
  }
}

// gpu.emu's host stage for code that links attest_gpu alone (the conformance engine), set at
// static initialisation (this object library is linked whole).
[[maybe_unused]] const bool host_stage_set = [] {
  gpu::emu_host_stage() = {&unsupported, &gpu::emu_prepare_host, &gpu::twin_tile_kv};
  return true;
}();

ATTEST_REGISTER_KERNELS([] {
  std::vector<std::unique_ptr<Kernel>> v;
  for (const NamedRecipe& nr : named_recipes()) v.push_back(std::make_unique<EmuKernel>(std::string(nr.name)));
  return v;
});

}  // namespace
}  // namespace attest::kernels::gpu_emu
