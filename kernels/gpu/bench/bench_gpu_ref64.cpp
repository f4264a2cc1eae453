// bench_gpu_ref64: TFLOP/s of gpu.ref64's device-pointer entry point, f64 outputs; inputs f64 or
// f32 (--dtype; f32 is what the device engine hands it: the generated tensors).
//   bench_gpu_ref64 [problem] [--path automatic|portable|mma] [--dtype f64|f32] [--iters N] [--json FILE]
// Default problem b1h24s8192d128 (the target shape). Inputs are uniform in [-1, 1) from a
// fixed host generator; after timing, `check_rows` output rows are recomputed on the host in
// long double and the worst normwise relative error is printed (a benchmark that is wrong is
// not a benchmark). FLOPs = Problem::flops() = 2 (D + Dv) per visible (query, key) pair per head.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "attest/core/problem.hpp"
#include "attest/kernels/gpu/attn_fwd_ref64.hpp"
#include "attest/kernels/gpu/device.hpp"
#include "bench_util.hpp"

namespace {

using attest::gpu::DeviceBuffer;

attest::TensorRef arg(const DeviceBuffer& b, std::int64_t s1, std::int64_t h, std::int64_t d,
                      attest::DType type = attest::DType::f64) {
  attest::TensorRef t;
  t.data = b.data();
  t.dtype = type;
  t.device = true;
  t.stride[0] = s1 * h * d, t.stride[1] = h * d, t.stride[2] = d, t.stride[3] = 1;
  return t;
}

int run(int argc, char** argv) {
  std::string text = "b1h24s8192d128", json;
  attest::gpu::Ref64Path path = attest::gpu::Ref64Path::automatic;
  int iters = 10;
  bool f32 = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--path" && i + 1 < argc) {
      const std::string v = argv[++i];
      if (v == "automatic") path = attest::gpu::Ref64Path::automatic;
      else if (v == "portable") path = attest::gpu::Ref64Path::portable;
      else if (v == "mma") path = attest::gpu::Ref64Path::mma;
      else throw attest::Error("unknown path '" + v + "' (valid: automatic, portable, mma)");
    } else if (a == "--dtype" && i + 1 < argc) {
      const std::string v = argv[++i];
      if (v != "f32" && v != "f64") throw attest::Error("unknown dtype '" + v + "' (valid: f64, f32)");
      f32 = v == "f32";
    } else if (a == "--iters" && i + 1 < argc) {
      iters = std::max(1, std::stoi(argv[++i]));
    } else if (a == "--json" && i + 1 < argc) {
      json = argv[++i];
    } else if (!a.empty() && a[0] != '-') {
      text = a;
    } else {
      throw attest::Error("usage: bench_gpu_ref64 [problem] [--path automatic|portable|mma] [--dtype f64|f32] [--iters N] [--json FILE]");
    }
  }
  const attest::Problem p = attest::parse_problem(text);
  if (p.ragged()) throw attest::Error("bench_gpu_ref64: ragged problems are not benchmarked");
  if (attest::gpu::device_count() == 0) throw attest::Error("bench_gpu_ref64: no GPU device");
  const auto dev = attest::gpu::device_info(0);
  const std::int64_t B = p.batch, S = p.seqlen_q, T = p.seqlen_kv, H = p.heads_q, Hk = p.heads_kv, D = p.head_dim,
                     Dv = p.head_dim_v;
  std::vector<double> q(static_cast<std::size_t>(B * S * H * D)), k(static_cast<std::size_t>(B * T * Hk * D)),
      v(static_cast<std::size_t>(B * T * Hk * Dv));
  std::mt19937_64 rng(12345);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  // f32 inputs: the values are rounded to float first, so the host check sees what the device does.
  for (auto* x : {&q, &k, &v})
    for (double& e : *x) e = f32 ? static_cast<float>(u(rng)) : u(rng);
  const std::size_t es = f32 ? 4 : 8;
  DeviceBuffer dq(q.size() * es), dk(k.size() * es), dv(v.size() * es), dout(static_cast<std::size_t>(B * S * H * Dv) * 8),
      dlse(static_cast<std::size_t>(B * H * S) * 8);
  const auto up = [&](DeviceBuffer& d, const std::vector<double>& x) {
    if (!f32) return d.upload(x.data(), d.bytes());
    const std::vector<float> xf(x.begin(), x.end());
    d.upload(xf.data(), d.bytes());
  };
  up(dq, q);
  up(dk, k);
  up(dv, v);
  const auto in_type = f32 ? attest::DType::f32 : attest::DType::f64;
  attest::gpu::Ref64Args a = attest::gpu::ref64_args(p);
  a.q = arg(dq, S, H, D, in_type);
  a.k = arg(dk, T, Hk, D, in_type);
  a.v = arg(dv, T, Hk, Dv, in_type);
  a.out = arg(dout, S, H, Dv);
  a.lse = arg(dlse, 1, S, 1);
  a.lse.stride[0] = H * S, a.lse.stride[1] = S, a.lse.stride[2] = 1;
  const auto resolved = attest::gpu::ref64_resolve(a, path);

  const std::vector<double> ms = attest::gpu::bench::sorted_ms(iters, [&] { attest::gpu::attn_fwd_ref64(a, path); });
  const double median = ms[ms.size() / 2], flops = p.flops();
  const double tflops = flops / (median * 1e-3) / 1e12;

  // Spot check: rows spread over the problem, recomputed in long double on the host.
  std::vector<double> out(static_cast<std::size_t>(B * S * H * Dv));
  dout.download(out.data(), dout.bytes());
  double worst = 0;
  const int check_rows = 8;
  for (int r = 0; r < check_rows; ++r) {
    const std::int64_t b = r % B, h = (r * 7) % H, i = (S - 1) * r / std::max(1, check_rows - 1), g = h / p.group();
    const std::int64_t hi = std::clamp<std::int64_t>(p.visible_keys(b, i), 0, T);
    std::vector<long double> s(static_cast<std::size_t>(hi)), acc(static_cast<std::size_t>(Dv), 0.0L);
    long double m = -INFINITY, l = 0;
    for (std::int64_t j = 0; j < hi; ++j) {
      long double dot = 0;
      for (std::int64_t d = 0; d < D; ++d)
        dot += static_cast<long double>(q[static_cast<std::size_t>(((b * S + i) * H + h) * D + d)]) * k[static_cast<std::size_t>(((b * T + j) * Hk + g) * D + d)];
      s[static_cast<std::size_t>(j)] = dot * static_cast<long double>(p.scale());
      m = std::max(m, s[static_cast<std::size_t>(j)]);
    }
    for (std::int64_t j = 0; j < hi; ++j) {
      const long double e = std::exp(s[static_cast<std::size_t>(j)] - m);
      l += e;
      for (std::int64_t d = 0; d < Dv; ++d) acc[static_cast<std::size_t>(d)] += e * v[static_cast<std::size_t>(((b * T + j) * Hk + g) * Dv + d)];
    }
    long double err = 0, norm = 0;
    for (std::int64_t d = 0; d < Dv; ++d) {
      const long double w = l == 0 ? 0.0L : acc[static_cast<std::size_t>(d)] / l;
      err = std::max(err, std::abs(out[static_cast<std::size_t>(((b * S + i) * H + h) * Dv + d)] - w));
      norm = std::max(norm, std::abs(w));
    }
    if (norm > 0) worst = std::max(worst, static_cast<double>(err / norm));
  }

  char line[1024];
  std::snprintf(line, sizeof line,
                "{\"bench\": \"gpu.ref64\", \"problem\": \"%s\", \"path\": \"%s\", \"dtype\": \"%s\", \"device\": \"%s\", \"iters\": %d, "
                "\"median_ms\": %.4f, \"min_ms\": %.4f, \"tflops\": %.3f, \"spot_check_rel_err\": %.3e}",
                attest::to_string(p).c_str(), attest::gpu::path_name(resolved), f32 ? "f32" : "f64", dev.name.c_str(), iters, median, ms.front(),
                tflops, worst);
  std::cout << line << std::endl;
  if (!json.empty()) std::ofstream(json) << line << "\n";
  return worst <= 1e-13 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) { return attest::gpu::bench::guarded_main("bench_gpu_ref64", run, argc, argv); }
