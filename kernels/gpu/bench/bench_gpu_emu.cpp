// bench_gpu_emu: TFLOP/s of the gpu.emu.<recipe> device stage (attn_fwd_emu), per named recipe.
//   bench_gpu_emu [problem] [--recipes a,b,...] [--iters N] [--json FILE]
// Default problem b1h16s4096d128 (non-causal), every named recipe the device supports. Inputs
// N(0,1) from the datasets generator; stage 0 (host quantization and upload) is timed
// separately and is not in the TFLOP/s. FLOPs = Problem::flops() = 2 (D + Dv) per visible
// (query, key) pair per head. The output of the last iteration must equal the first bit for
// bit (the kernels are deterministic; gpu_emu_tests checks them against the emulator).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "attest/core/problem.hpp"
#include "attest/core/recipe.hpp"
#include "attest/datasets/distributions.hpp"
#include "attest/kernels/gpu/attn_fwd_emu.hpp"
#include "attest/kernels/gpu/device.hpp"
#include "attest/kernels/gpu/emu_prepare.hpp"
#include "bench_util.hpp"

namespace {

int run(int argc, char** argv) {
  std::string text = "b1h16s4096d128", json, list;
  int iters = 3;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--iters" && i + 1 < argc) iters = std::max(1, std::stoi(argv[++i]));
    else if (a == "--json" && i + 1 < argc) json = argv[++i];
    else if (a == "--recipes" && i + 1 < argc) list = argv[++i];
    else if (!a.empty() && a[0] != '-') text = a;
    else throw attest::Error("usage: bench_gpu_emu [problem] [--recipes a,b,...] [--iters N] [--json FILE]");
  }
  std::vector<std::string> recipes;
  if (list.empty()) {
    for (const auto& nr : attest::named_recipes()) recipes.emplace_back(nr.name);
  } else {
    std::stringstream ss(list);
    for (std::string r; std::getline(ss, r, ',');) recipes.push_back(r);
  }
  const attest::Problem p = attest::parse_problem(text);
  if (attest::gpu::device_count() == 0) throw attest::Error("bench_gpu_emu: no GPU device");
  const auto dev = attest::gpu::device_info(0);
  const auto in = attest::datasets::generate_qkv(p, attest::datasets::Distribution::normal, 7);
  std::ostringstream js;
  js << "{\"problem\": \"" << attest::to_string(p) << "\", \"device\": \"" << dev.name << "\", \"iters\": " << iters
     << ", \"results\": [";
  bool first = true;
  int failures = 0;
  for (const std::string& name : recipes) {
    const attest::Recipe r = attest::parse_recipe(name);
    const auto t0 = std::chrono::steady_clock::now();
    attest::gpu::EmuRun prep;
    try {
      prep = attest::gpu::emu_prepare(p, r, in.q, in.k, in.v);
    } catch (const attest::Error& e) {
      std::printf("%-26s skipped: %s\n", name.c_str(), e.what());
      continue;
    }
    const double prep_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    attest::gpu::attn_fwd_emu(prep.params);  // warm-up
    attest::gpu::synchronize();
    std::vector<float> out0, lse0, out1, lse1;
    attest::gpu::emu_collect(prep, out0, lse0);
    attest::gpu::EventTimer timer;
    timer.start();
    for (int it = 0; it < iters; ++it) attest::gpu::attn_fwd_emu(prep.params);
    const double ms = timer.stop_ms() / iters;
    attest::gpu::emu_collect(prep, out1, lse1);
    const bool same = std::memcmp(out0.data(), out1.data(), out0.size() * 4) == 0 &&
                      std::memcmp(lse0.data(), lse1.data(), lse0.size() * 4) == 0;
    failures += !same;
    const double tflops = p.flops() / (ms * 1e-3) / 1e12;
    std::printf("%-26s %10.3f ms  %7.3f TFLOP/s  (stage 0 on the host: %.2f s)%s\n", name.c_str(), ms, tflops, prep_s,
                same ? "" : "  NOT DETERMINISTIC");
    js << (first ? "" : ",") << "\n  {\"recipe\": \"" << name << "\", \"ms\": " << ms << ", \"tflops\": " << tflops
       << ", \"host_stage0_s\": " << prep_s << ", \"deterministic\": " << (same ? "true" : "false") << "}";
    first = false;
  }
  js << "\n]}\n";
  if (!json.empty()) {
    std::ofstream f(json);
    f << js.str();
    if (!f) throw attest::Error("bench_gpu_emu: cannot write " + json);
  }
  return failures == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) { return attest::gpu::bench::guarded_main("bench_gpu_emu", run, argc, argv); }
