// Device comparison and gathering for the device-resident gate (compare.hpp). Grid-stride
// loops over the logical index; reductions by atomics on 64-bit counters (order-free, so the
// figures are exact and run-to-run identical).
#include "attest/kernels/gpu/compare.hpp"

#include <bit>
#include <string>
#include <vector>

#include "attest/kernels/gpu/device.hpp"
#include "runtime.hpp"

namespace attest::gpu {
namespace {

using i64 = std::int64_t;
using u64 = unsigned long long;

// Reads one element as float. bf16 and f16 by their bits (exact widening; no fp16 headers,
// which differ between the two dialects).
__device__ inline float load(const void* p, CmpType t, i64 off) {
  if (t == CmpType::f32) return static_cast<const float*>(p)[off];
  const unsigned short h = static_cast<const unsigned short*>(p)[off];
  if (t == CmpType::bf16) return __uint_as_float(static_cast<unsigned>(h) << 16);
  const unsigned sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1Fu, man = h & 0x3FFu;
  if (exp == 0x1F) return __uint_as_float(sign | 0x7F800000u | (man << 13));
  if (exp != 0) return __uint_as_float(sign | ((exp + 112u) << 23) | (man << 13));
  const float m = static_cast<float>(man) * 5.9604644775390625e-8f;  // man * 2^-24, exact
  return sign != 0 ? -m : m;
}

__device__ inline unsigned bits_of(const void* p, CmpType t, i64 off) {
  if (t == CmpType::f32) return __float_as_uint(static_cast<const float*>(p)[off]);
  return static_cast<const unsigned short*>(p)[off];
}

struct Acc {
  u64 bit_diff, nonfinite_a, first, max_abs_bits;
};

__device__ inline i64 offset(const View4& v, i64 i0, i64 i1, i64 i2, i64 i3) {
  return i0 * v.stride[0] + i1 * v.stride[1] + i2 * v.stride[2] + i3 * v.stride[3];
}

// One block row per (i0, i1, i2), threads along i3: the logical index is split once per row
// (64-bit division per element cost more than the comparison itself).
__global__ void compare_kernel(View4 a, View4 b, i64 rows, Acc* acc) {
  const i64 n3 = a.shape[3];
  for (i64 r = blockIdx.x; r < rows; r += gridDim.x) {
    const i64 i2 = r % a.shape[2], i1 = (r / a.shape[2]) % a.shape[1], i0 = r / (a.shape[2] * a.shape[1]);
    const i64 ra = offset(a, i0, i1, i2, 0), rb = b.data != nullptr ? offset(b, i0, i1, i2, 0) : 0;
    for (i64 i3 = threadIdx.x; i3 < n3; i3 += blockDim.x) {
      const i64 e = r * n3 + i3;
      const i64 oa = ra + i3 * a.stride[3];
      const float x = load(a.data, a.type, oa);
      const bool fin = x - x == 0.0f;
      if (!fin) atomicAdd(&acc->nonfinite_a, 1ull);
      if (b.data == nullptr) {
        if (!fin) atomicMin(&acc->first, static_cast<u64>(e));
        continue;
      }
      const i64 ob = rb + i3 * b.stride[3];
      const bool same = a.type == b.type ? bits_of(a.data, a.type, oa) == bits_of(b.data, b.type, ob)
                                         : __float_as_uint(x) == __float_as_uint(load(b.data, b.type, ob));
      if (!same) {
        atomicAdd(&acc->bit_diff, 1ull);
        atomicMin(&acc->first, static_cast<u64>(e));
        const float y = load(b.data, b.type, ob);
        const float d = __uint_as_float(__float_as_uint(x - y) & 0x7FFFFFFFu);  // |x - y| by its bits (no ocml call)
        // Non-negative floats order as their bit patterns: atomicMax on the bits is a float max.
        if (d - d == 0.0f) atomicMax(&acc->max_abs_bits, static_cast<u64>(__float_as_uint(d)));
      }
    }
  }
}

__global__ void gather_kernel(View4 s, i64 lo0, i64 lo1, i64 lo2, i64 lo3, i64 n1, i64 n2, i64 n3, i64 n, float* out) {
  for (i64 e = static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x; e < n; e += static_cast<i64>(gridDim.x) * blockDim.x) {
    const i64 i3 = e % n3, i2 = (e / n3) % n2, i1 = (e / (n3 * n2)) % n1, i0 = e / (n3 * n2 * n1);
    out[e] = load(s.data, s.type, offset(s, lo0 + i0, lo1 + i1, lo2 + i2, lo3 + i3));
  }
}

// One scratch per host thread, grown on demand: a gated call compares once per rerun, and a
// cudaMalloc/cudaFree pair per comparison cost more than the comparison itself (about 0.5 ms).
DeviceBuffer& scratch(std::size_t bytes) {
  thread_local DeviceBuffer buf;
  if (buf.bytes() < bytes) buf = DeviceBuffer(bytes);
  return buf;
}

int grid_for(i64 n) {
  const i64 blocks = (n + 255) / 256;
  return static_cast<int>(blocks < 65536 ? (blocks > 0 ? blocks : 1) : 65536);
}

}  // namespace

CmpFigures compare_device(const View4& a, const View4& b) {
  if (a.data == nullptr) throw Error("compare_device: tensor a is NULL");
  for (int i = 0; i < 4; ++i) {
    if (a.shape[i] < 0) throw Error("compare_device: negative extent");
    if (b.data != nullptr && b.shape[i] != a.shape[i])
      throw Error("compare_device: shapes differ in dimension " + std::to_string(i) + " (" + std::to_string(a.shape[i]) +
                  " vs " + std::to_string(b.shape[i]) + ")");
  }
  const i64 n = a.shape[0] * a.shape[1] * a.shape[2] * a.shape[3];
  CmpFigures f;
  f.count = n;
  if (n == 0) return f;
  DeviceBuffer& acc = scratch(sizeof(Acc));
  const Acc init{0, 0, ~0ull, 0};
  acc.upload(&init, sizeof(init));
  const i64 rows = a.shape[0] * a.shape[1] * a.shape[2];
  const int threads = a.shape[3] >= 256 ? 256 : a.shape[3] > 64 ? 128 : 64;
  compare_kernel<<<static_cast<int>(rows < 1048576 ? rows : 1048576), threads>>>(a, b, rows, acc.as<Acc>());
  ATTEST_GPU_CHECK_LAUNCH();
  Acc r{};
  acc.download(&r, sizeof(r));  // synchronous: also surfaces an asynchronous fault here
  f.bit_diff = static_cast<i64>(r.bit_diff);
  f.nonfinite_a = static_cast<i64>(r.nonfinite_a);
  f.first = r.first == ~0ull ? -1 : static_cast<i64>(r.first);
  f.max_abs = static_cast<double>(std::bit_cast<float>(static_cast<unsigned>(r.max_abs_bits)));
  return f;
}

void gather_f32(const View4& src, const std::int64_t lo[4], const std::int64_t hi[4], float* host_out) {
  i64 ext[4];
  for (int i = 0; i < 4; ++i) {
    if (lo[i] < 0 || hi[i] > src.shape[i] || lo[i] > hi[i])
      throw Error("gather_f32: range [" + std::to_string(lo[i]) + ", " + std::to_string(hi[i]) + ") outside dimension " +
                  std::to_string(i) + " of extent " + std::to_string(src.shape[i]));
    ext[i] = hi[i] - lo[i];
  }
  const i64 n = ext[0] * ext[1] * ext[2] * ext[3];
  if (n == 0) return;
  DeviceBuffer& tmp = scratch(static_cast<std::size_t>(n) * sizeof(float));
  gather_kernel<<<grid_for(n), 256>>>(src, lo[0], lo[1], lo[2], lo[3], ext[1], ext[2], ext[3], n, tmp.as<float>());
  ATTEST_GPU_CHECK_LAUNCH();
  tmp.download(host_out, static_cast<std::size_t>(n) * sizeof(float));
}

}  // namespace attest::gpu
