// FP64 reference attention throughput against the machine's FP64 FMA peak and against the plain-
// loop materialised algorithm (Algorithm::direct), all cores (OpenMP).
//   bench_reference --benchmark_counters_tabular=true
// GFLOP/s counts 4*B*H*S*T*D flops per pass (QK^T and PV, 2 flops per multiply-add, no mask).
// Counters: GFLOP = rate per wall second (all threads together); GFLOP_cpu = rate per second of
// process CPU time, i.e. per busy core, which stays meaningful when other jobs share the cores.
#include <benchmark/benchmark.h>
#include <omp.h>

#include <cstdint>
#include <ctime>
#include <random>
#include <string>

#if defined(__AVX512F__) || defined(__AVX2__)
#include <immintrin.h>
#endif

#include "attest/core/problem.hpp"
#include "attest/core/tensor.hpp"
#include "attest/reference/attention.hpp"

namespace {

using attest::DType;
using attest::Problem;
using attest::Tensor;

constexpr std::int64_t kB = 1, kH = 2, kD = 128;

double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

void set_counters(benchmark::State& state, double flops_per_iter, double cpu_seconds, int threads) {
  state.counters["GFLOP"] = benchmark::Counter(flops_per_iter * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["GFLOP_cpu"] = flops_per_iter * 1e-9 * static_cast<double>(state.iterations()) / cpu_seconds;
  state.counters["threads"] = threads;
}

Tensor normal(const attest::Shape& shape, std::uint64_t seed) {
  Tensor t(DType::f64, shape);
  std::mt19937_64 gen(seed);
  std::normal_distribution<double> dist;
  for (std::int64_t i = 0; i < t.numel(); ++i) t.data<double>()[i] = dist(gen);
  return t;
}

void attention_bench(benchmark::State& state, attest::ref::Algorithm algorithm) {
  const std::int64_t S = state.range(0);
  Problem p;
  p.batch = kB;
  p.heads_q = p.heads_kv = kH;
  p.seqlen_q = p.seqlen_kv = S;
  p.head_dim = p.head_dim_v = kD;
  p.dtype = DType::f64;
  const Tensor q = normal({kB, S, kH, kD}, 1), k = normal({kB, S, kH, kD}, 2), v = normal({kB, S, kH, kD}, 3);
  const double cpu0 = process_cpu_seconds();
  for (auto _ : state) {
    auto r = attest::ref::attention_typed<double>(p, q, k, v, algorithm);
    benchmark::DoNotOptimize(r.out.data());
  }
  const double flops = 4.0 * kB * kH * static_cast<double>(S) * static_cast<double>(S) * kD;
  set_counters(state, flops, process_cpu_seconds() - cpu0, omp_get_max_threads());
}

void BM_ReferenceOnlineFp64(benchmark::State& state) { attention_bench(state, attest::ref::Algorithm::online); }
void BM_ReferenceDirectFp64(benchmark::State& state) { attention_bench(state, attest::ref::Algorithm::direct); }

// Peak: each thread runs kChains independent FMA chains on registers (enough to cover the FMA
// latency times the number of FMA pipes), widest vectors the build allows.
void BM_Fp64FmaPeak(benchmark::State& state) {
  constexpr int kChains = 12;
  constexpr std::int64_t kIters = 20'000'000;
#if defined(__AVX512F__)
  constexpr int kLanes = 8;
#elif defined(__AVX2__)
  constexpr int kLanes = 4;
#else
  constexpr int kLanes = 1;
#endif
  int threads = 1;
  const double cpu0 = process_cpu_seconds();
  for (auto _ : state) {
    double sink = 0;
#pragma omp parallel reduction(+ : sink)
    {
#pragma omp single
      threads = omp_get_num_threads();
#if defined(__AVX512F__)
      __m512d a[kChains];
      for (int c = 0; c < kChains; ++c) a[c] = _mm512_set1_pd(1e-3 * c);
      const __m512d m = _mm512_set1_pd(0.999999), add = _mm512_set1_pd(1e-7);
      for (std::int64_t i = 0; i < kIters; ++i)
        for (int c = 0; c < kChains; ++c) a[c] = _mm512_fmadd_pd(a[c], m, add);
      alignas(64) double lanes[8];
      for (int c = 0; c < kChains; ++c) {
        _mm512_store_pd(lanes, a[c]);
        for (double x : lanes) sink += x;
      }
#elif defined(__AVX2__)
      __m256d a[kChains];
      for (int c = 0; c < kChains; ++c) a[c] = _mm256_set1_pd(1e-3 * c);
      const __m256d m = _mm256_set1_pd(0.999999), add = _mm256_set1_pd(1e-7);
      for (std::int64_t i = 0; i < kIters; ++i)
        for (int c = 0; c < kChains; ++c) a[c] = _mm256_fmadd_pd(a[c], m, add);
      alignas(32) double lanes[4];
      for (int c = 0; c < kChains; ++c) {
        _mm256_store_pd(lanes, a[c]);
        for (double x : lanes) sink += x;
      }
#else
      double a[kChains];
      for (int c = 0; c < kChains; ++c) a[c] = 1e-3 * c;
      for (std::int64_t i = 0; i < kIters; ++i)
        for (int c = 0; c < kChains; ++c) a[c] = std::fma(a[c], 0.999999, 1e-7);
      for (int c = 0; c < kChains; ++c) sink += a[c];
#endif
    }
    benchmark::DoNotOptimize(sink);
  }
  set_counters(state, 2.0 * kLanes * kChains * static_cast<double>(kIters) * threads, process_cpu_seconds() - cpu0,
               threads);
}

}  // namespace

BENCHMARK(BM_Fp64FmaPeak)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ReferenceOnlineFp64)->Arg(1024)->Arg(4096)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ReferenceDirectFp64)->Arg(1024)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ReferenceDirectFp64)->Arg(4096)->Iterations(1)->UseRealTime()->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
