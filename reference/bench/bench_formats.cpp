// Encode throughput: the batch fast path (encode_f32, bit manipulation with RNE by integer add)
// against straightforward scalar versions in the same run. Inputs: normal(0, 100) float32, so
// normals, subnormals (|x| < 2^-6 for e4m3fn) and overflow all occur.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <vector>

#include "attest/reference/formats.hpp"

namespace {
using attest::FormatId;

std::vector<float> inputs(std::size_t n) {
  std::mt19937 rng(1234);
  std::normal_distribution<float> d(0.0f, 100.0f);
  std::vector<float> x(n);
  for (auto& v : x) v = d(rng);
  return x;
}

void BM_encode_batch(benchmark::State& state, FormatId f) {
  const auto x = inputs(static_cast<std::size_t>(state.range(0)));
  std::vector<std::uint8_t> out(x.size());
  for (auto _ : state) {
    attest::ref::encode_f32(f, x, out);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}

// One call of the scalar float overload per element (same fast kernel, no batching).
void BM_encode_scalar_float(benchmark::State& state, FormatId f) {
  const auto x = inputs(static_cast<std::size_t>(state.range(0)));
  std::vector<std::uint8_t> out(x.size());
  for (auto _ : state) {
    for (std::size_t i = 0; i < x.size(); ++i) out[i] = static_cast<std::uint8_t>(attest::ref::encode(f, x[i]));
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}

// The generic frexp/ldexp encoder from double (what every non-RNE mode uses).
void BM_encode_scalar_generic(benchmark::State& state, FormatId f) {
  const auto x = inputs(static_cast<std::size_t>(state.range(0)));
  std::vector<std::uint8_t> out(x.size());
  for (auto _ : state) {
    for (std::size_t i = 0; i < x.size(); ++i)
      out[i] = static_cast<std::uint8_t>(attest::ref::encode(f, static_cast<double>(x[i])));
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}

void BM_decode_batch(benchmark::State& state, FormatId f) {
  const auto x = inputs(static_cast<std::size_t>(state.range(0)));
  std::vector<std::uint8_t> codes(x.size());
  attest::ref::encode_f32(f, x, codes);
  std::vector<float> out(x.size());
  for (auto _ : state) {
    attest::ref::decode_f32(f, codes, out);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}

constexpr std::int64_t kN = 1 << 20;
BENCHMARK_CAPTURE(BM_encode_batch, fp8_e4m3fn, FormatId::fp8_e4m3fn)->Arg(kN);
BENCHMARK_CAPTURE(BM_encode_scalar_float, fp8_e4m3fn, FormatId::fp8_e4m3fn)->Arg(kN);
BENCHMARK_CAPTURE(BM_encode_scalar_generic, fp8_e4m3fn, FormatId::fp8_e4m3fn)->Arg(kN);
BENCHMARK_CAPTURE(BM_encode_batch, fp8_e5m2, FormatId::fp8_e5m2)->Arg(kN);
BENCHMARK_CAPTURE(BM_encode_batch, fp4_e2m1fn, FormatId::fp4_e2m1fn)->Arg(kN);
BENCHMARK_CAPTURE(BM_decode_batch, fp8_e4m3fn, FormatId::fp8_e4m3fn)->Arg(kN);
}  // namespace
BENCHMARK_MAIN();
