// bench_gpu_quantize: device quantizer bandwidth against a device-to-device copy of the same
// input, measured in the same run.
//   bench_gpu_quantize [problem] [--scheme S]... [--iters N] [--json FILE]
// Default problem b1h32s65536d128: Q as [B, S, H, D] bshd f32 = 1 GiB, quantized as the
// [B, H, S, D] view the attention kernels use. Inputs come from the device data generator (normal).
// Bandwidth counts useful bytes: input read once + codes + scales written (a copy moves 2x its
// size); passes a scheme needs beyond that (the amax pass of per_tensor / per_channel, the
// pre-transform copy of smoothing/rotation/prescale) are its cost, not extra credit.
// Goal (issue 5): >= 75% of the copy's bandwidth at >= 1 GiB inputs.
// Also reported: `input_reads`, how often the scheme must read the input (2 for per_tensor /
// per_channel and for a computed smoothing mean, 3 for both: the scale or the mean depends on
// every token before the first code), and `moved_fraction`, the bandwidth of all bytes moved
// (input_reads x input + codes + scales) against the copy: how close the kernels are to memory
// speed, whatever the scheme's passes.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "attest/core/problem.hpp"
#include "attest/datasets/distributions.hpp"
#include "attest/kernels/gpu/device.hpp"
#include "attest/kernels/gpu/generate_qkv.hpp"
#include "attest/kernels/gpu/quantize.hpp"
#include "bench_util.hpp"

namespace {

using attest::gpu::DeviceBuffer;

template <class F>
double median_ms(int iters, F&& f) {
  const auto ms = attest::gpu::bench::sorted_ms(iters, std::forward<F>(f));
  return ms[ms.size() / 2];
}

int run(int argc, char** argv) {
  std::string text = "b1h32s65536d128", json;
  std::vector<std::string> schemes;
  int iters = 10;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--scheme" && i + 1 < argc) schemes.emplace_back(argv[++i]);
    else if (a == "--iters" && i + 1 < argc) iters = std::max(1, std::stoi(argv[++i]));
    else if (a == "--json" && i + 1 < argc) json = argv[++i];
    else if (!a.empty() && a[0] != '-') text = a;
    else throw attest::Error("usage: bench_gpu_quantize [problem] [--scheme S]... [--iters N] [--json FILE]");
  }
  if (schemes.empty())
    schemes = {"bf16",
               "int8:per_block=128:round=half:prescale=sm_log2e",
               "int8:per_block=64:round=half:smooth=bf16",
               "int8:per_thread=sm90:scale=eps:round=half",
               "int8:per_token",
               "int8:per_tensor",
               "fp8_e4m3fn:per_channel",
               "fp8_e4m3fn:per_token",
               "mxfp8_e4m3fn:scale=rceil",
               "mxfp4_e2m1fn:scale=aiter_triton_rne:rotate=h32_bf16"};
  const attest::Problem p = attest::parse_problem(text);
  if (attest::gpu::device_count() == 0) throw attest::Error("bench_gpu_quantize: no GPU device");
  const auto dev = attest::gpu::device_info(0);
  const std::int64_t B = p.batch, S = p.seqlen_q, H = p.heads_q, D = p.head_dim;
  const std::int64_t n = B * S * H * D;
  const auto in_bytes = static_cast<std::size_t>(n) * 4;
  DeviceBuffer q(in_bytes), k(static_cast<std::size_t>(p.batch * p.seqlen_kv * p.heads_kv * p.head_dim) * 4),
      v(static_cast<std::size_t>(p.batch * p.seqlen_kv * p.heads_kv * p.head_dim_v) * 4), dst(in_bytes);
  attest::gpu::generate_qkv_device(p, attest::datasets::Distribution::normal, 1, q.as<float>(), k.as<float>(), v.as<float>());
  attest::gpu::synchronize();

  const double copy_ms = median_ms(iters, [&] { attest::gpu::copy_device(dst.data(), q.data(), in_bytes); });
  const double copy_gbs = 2.0 * static_cast<double>(in_bytes) / (copy_ms * 1e-3) / 1e9;
  std::string out = "{\"bench\": \"gpu.quantize\", \"problem\": \"" + attest::to_string(p) + "\", \"device\": \"" + dev.name +
                    "\", \"input_gib\": " + std::to_string(static_cast<double>(in_bytes) / (1024.0 * 1024 * 1024)) +
                    ", \"iters\": " + std::to_string(iters) + ", \"copy_ms\": " + std::to_string(copy_ms) +
                    ", \"copy_gbs\": " + std::to_string(copy_gbs) + ", \"goal_fraction\": 0.75, \"schemes\": [";
  std::printf("device %s, input %s (%.2f GiB), copy %.3f ms = %.1f GB/s\n", dev.name.c_str(), attest::to_string(p).c_str(),
              static_cast<double>(in_bytes) / (1024.0 * 1024 * 1024), copy_ms, copy_gbs);
  bool first = true;
  for (const auto& text_s : schemes) {
    const attest::Scheme ds = attest::parse_scheme(text_s);
    const std::int64_t slabs = B * H;
    DeviceBuffer codes(attest::gpu::quantize_codes_bytes(ds, n)), scales(attest::gpu::quantize_scales_bytes(ds, slabs, S, D)),
        mean(static_cast<std::size_t>(slabs * D) * 4), ws(attest::gpu::quantize_workspace_bytes(ds, slabs, S, D));
    attest::gpu::QuantizeArgs a;
    a.x = q.as<float>();
    a.lead0 = B, a.lead1 = H, a.T = S, a.C = D;
    a.stride[0] = S * H * D, a.stride[1] = D, a.stride[2] = H * D, a.stride[3] = 1;
    a.sm_scale = p.scale();
    a.codes = codes.data();
    a.scales = scales.data();
    a.mean_out = ds.smooth != attest::Scheme::Smoothing::none ? mean.as<float>() : nullptr;
    a.workspace = ws.data();
    const double ms = median_ms(iters, [&] { attest::gpu::quantize_device(ds, a); });
    const double bytes = static_cast<double>(in_bytes + codes.bytes() + scales.bytes());
    const double gbs = bytes / (ms * 1e-3) / 1e9;
    const bool global = (ds.family == attest::Scheme::Family::int8 || ds.family == attest::Scheme::Family::fp8) &&
                        (ds.granularity == attest::Scheme::Granularity::per_tensor ||
                         ds.granularity == attest::Scheme::Granularity::per_channel);
    const int reads = 1 + (global ? 1 : 0) + (ds.smooth != attest::Scheme::Smoothing::none ? 1 : 0);
    const double moved = bytes + static_cast<double>(reads - 1) * static_cast<double>(in_bytes);
    const double moved_fraction = moved / (ms * 1e-3) / 1e9 / copy_gbs;
    std::printf("  %-55s %8.3f ms %8.1f GB/s  %5.1f%% of copy (%d reads, moved %5.1f%%)\n", text_s.c_str(), ms, gbs,
                100.0 * gbs / copy_gbs, reads, 100.0 * moved_fraction);
    char line[512];
    std::snprintf(line, sizeof line,
                  "%s{\"scheme\": \"%s\", \"median_ms\": %.4f, \"gbs\": %.2f, \"fraction_of_copy\": %.4f, "
                  "\"input_reads\": %d, \"moved_fraction\": %.4f}",
                  first ? "" : ", ", text_s.c_str(), ms, gbs, gbs / copy_gbs, reads, moved_fraction);
    out += line;
    first = false;
  }
  out += "]}";
  if (!json.empty()) std::ofstream(json) << out << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return attest::gpu::bench::guarded_main("bench_gpu_quantize", run, argc, argv); }
