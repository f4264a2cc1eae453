// The conformance engine's device emulator (engine.cpp DeviceEmulator: gpu.emu on the planned
// blocks) against its host emulator (ref::emulate / emulate_rows), through engine::judge on
// device buffers: gpu.emu is bitwise equal to the emulator, so verdicts and every block figure
// (the block rule's budget and floor, the confirmation's own budgets) must be identical.
// SKIPs without a device.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "attest/conformance/engine.hpp"
#include "attest/kernels/gpu/device.hpp"
#include "attest/datasets/distributions.hpp"
#include "attest/kernels/kernel.hpp"
#include "gpu_test_util.hpp"
#include "kernel_test_util.hpp"

namespace attest::gpu::test {
namespace {

namespace kt = attest::kernels::test;
namespace engine = attest::conformance::engine;

struct OnDevice {
  DeviceBuffer buf;
  TensorRef ref;
  explicit OnDevice(const Tensor& host) {
    const Tensor t = host.contiguous();
    buf = DeviceBuffer(static_cast<std::size_t>(t.numel()) * dtype_size(t.dtype()));
    buf.upload(t.raw(), buf.bytes());
    ref = engine::ref_of(t);
    ref.data = buf.data();
    ref.device = true;
  }
};

engine::Report judge(const conformance::Case& c, const OnDevice& q, const OnDevice& k, const OnDevice& v,
                     const OnDevice& out, double macs, bool device_emulator) {
  engine::JudgeRequest r;
  r.c = c;
  r.checks = {"accuracy", "bitwise"};
  r.sample.max_macs = macs;
  r.sample.device_emulator = device_emulator;
  r.q = q.ref;
  r.k = k.ref;
  r.v = v.ref;
  r.out = out.ref;
  return engine::judge(r);
}

TEST(EngineDeviceEmulator, SameVerdictsAndBudgetsAsTheHostEmulator) {
  ATTEST_REQUIRE_GPU();
  int judged = 0;
  for (const char* recipe : {"bf16", "f32", "bf16_fa4", "sage_int8_fp8_perblock", "fp8_fp8", "mxfp4_fp8"})
    for (const char* problem : {"b2h4k2s200d128", "b1h2s300d64:mask=causal_tl"}) {
      const std::string name = std::string("gpu.emu.") + recipe;
      kernels::Kernel* kernel = kernels::Registry::instance().find(name);
      ASSERT_NE(kernel, nullptr) << name;
      conformance::Case c;
      c.kernel = name;
      c.recipe = parse_recipe(kernel->recipes().at(0));
      c.problem = parse_problem(problem);
      if (const Status st = kernel->supports(c.problem, c.recipe); !st) {
        std::printf("[ %s ] skips %s: %s\n", name.c_str(), problem, st.reason().c_str());
        continue;
      }
      const auto in = datasets::generate_qkv(c.problem, c.dist, c.seed);
      const kt::Result got = kt::run_kernel(name, c.problem, c.recipe, in);
      // The kernel's own output (exact), and one with block (0, 1, rows 64-127) off by 3%.
      Tensor bad = got.out.contiguous();
      const std::int64_t S = c.problem.seqlen_q, H = c.problem.heads_q, Dv = c.problem.head_dim_v;
      for (std::int64_t s = 64; s < 128; ++s)
        for (std::int64_t d = 0; d < Dv; ++d) bad.data<float>()[(s * H + 1) * Dv + d] *= 1.03f;
      ASSERT_EQ(bad.numel(), c.problem.batch * S * H * Dv);
      const OnDevice q(in.q), k(in.k), v(in.v), exact(got.out), off(bad);
      for (const OnDevice* out : {&exact, &off})
        for (const double macs : {double(1 << 21), 1e12}) {  // a sample (block rule, confirmation); every block
          SCOPED_TRACE(name + " " + problem + (out == &off ? " perturbed" : " exact") + " macs " + std::to_string(macs));
          const engine::Report dev = judge(c, q, k, v, *out, macs, true);
          const engine::Report host = judge(c, q, k, v, *out, macs, false);
          EXPECT_EQ(dev.sample.at("emulator"), "gpu.emu (device)") << dev.sample.value("emulator_host_why", "");
          EXPECT_EQ(host.sample.at("emulator"), "ref::emulate (host)");
          ASSERT_EQ(dev.results.size(), host.results.size());
          for (std::size_t i = 0; i < dev.results.size(); ++i) {
            const auto &a = dev.results[i].outcome, &b = host.results[i].outcome;
            EXPECT_EQ(a.verdict, b.verdict) << dev.results[i].check << ": " << a.reason << " | " << b.reason;
            EXPECT_EQ(a.reason, b.reason);
          }
          nlohmann::json fa = dev.results.at(0).outcome.figures, fb = host.results.at(0).outcome.figures;
          ASSERT_TRUE(fa.contains("blocks") && fb.contains("blocks")) << fa.dump() << "\n" << fb.dump();
          const auto &ra = fa.at("blocks").at("rule"), &rb = fb.at("blocks").at("rule");
          // Bit for bit: the same emulator outputs give the same doubles.
          for (const char* f : {"budget_rel_l2", "floor_rel_l2", "budget_max_rel", "floor_max_rel"})
            EXPECT_EQ(ra.at(f).get<double>(), rb.at(f).get<double>()) << f;
          EXPECT_GT(ra.at("budget_rel_l2").get<double>(), 0.0);
          // Every figure but the sample's (timings, which emulator ran), accuracy and bitwise alike.
          for (std::size_t i = 0; i < dev.results.size(); ++i) {
            nlohmann::json a = dev.results[i].outcome.figures, b = host.results[i].outcome.figures;
            a.erase("sample");
            b.erase("sample");
            EXPECT_EQ(a.dump(), b.dump()) << dev.results[i].check;
          }
          ++judged;
        }
    }
  EXPECT_GT(judged, 0);
}

}  // namespace
}  // namespace attest::gpu::test
