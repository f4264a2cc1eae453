// Device comparisons for the conformance engine (compare.hpp). Grid-stride loops over the
// logical index; counters reduced by atomics on 64-bit integers (order-free, so the figures are
// exact and run-to-run identical); error sums by a fixed-order tree per block.
#include "attest/kernels/gpu/compare.hpp"

#include <bit>
#include <memory>
#include <string>
#include <vector>

#include "attest/core/status.hpp"
#include "attest/kernels/gpu/device.hpp"
#include "runtime.hpp"

namespace attest::gpu {
namespace {

using i64 = std::int64_t;
using u64 = unsigned long long;

struct Acc {
  u64 bit_diff, nonfinite_a, first, max_abs_bits;
};

// One block row per (i0, i1, i2), threads along i3: the logical index is split once per row
// (64-bit division per element cost more than the comparison itself).
__global__ void compare_kernel(TensorRef a, TensorRef b, i64 rows, Acc* acc) {
  const i64 n3 = a.shape[3];
  for (i64 r = blockIdx.x; r < rows; r += gridDim.x) {
    const i64 i2 = r % a.shape[2], i1 = (r / a.shape[2]) % a.shape[1], i0 = r / (a.shape[2] * a.shape[1]);
    const i64 ra = a.offset(i0, i1, i2, 0), rb = b.data != nullptr ? b.offset(i0, i1, i2, 0) : 0;
    for (i64 i3 = threadIdx.x; i3 < n3; i3 += blockDim.x) {
      const i64 e = r * n3 + i3;
      const i64 oa = ra + i3 * a.stride[3];
      const float x = static_cast<float>(elem::load(a, oa));
      const bool fin = x - x == 0.0f;
      if (!fin) atomicAdd(&acc->nonfinite_a, 1ull);
      if (b.data == nullptr) {
        if (!fin) atomicMin(&acc->first, static_cast<u64>(e));
        continue;
      }
      const i64 ob = rb + i3 * b.stride[3];
      const float y = static_cast<float>(elem::load(b, ob));
      const bool same = a.dtype == b.dtype ? elem::bits(a, oa) == elem::bits(b, ob) : __float_as_uint(x) == __float_as_uint(y);
      if (!same) {
        atomicAdd(&acc->bit_diff, 1ull);
        atomicMin(&acc->first, static_cast<u64>(e));
        const float d = __uint_as_float(__float_as_uint(x - y) & 0x7FFFFFFFu);  // |x - y| by its bits (no ocml call)
        // Non-negative floats order as their bit patterns: atomicMax on the bits is a float max.
        if (d - d == 0.0f) atomicMax(&acc->max_abs_bits, static_cast<u64>(__float_as_uint(d)));
      }
    }
  }
}

__global__ void checksum_kernel(TensorRef a, i64 rows, u64* sum) {
  // blockDim.x is a power of two <= 256 (threads_for).
  __shared__ u64 part[256];
  const i64 n3 = a.shape[3];
  u64 local = 0;
  for (i64 r = blockIdx.x; r < rows; r += gridDim.x) {
    const i64 i2 = r % a.shape[2], i1 = (r / a.shape[2]) % a.shape[1], i0 = r / (a.shape[2] * a.shape[1]);
    const i64 ra = a.offset(i0, i1, i2, 0);
    for (i64 i3 = threadIdx.x; i3 < n3; i3 += blockDim.x)
      local += elem::checksum_term(elem::bits(a, ra + i3 * a.stride[3]), static_cast<std::uint64_t>(r * n3 + i3));
  }
  // One atomic per block, not per thread: millions of same-address atomics serialise in L2
  // (with one per thread the guarded calls cost ~20 ms of harness each on an H100 at
  // b1h24s8192d128, docs/results/complete-gpu; the atomics are the suspect, not profiled).
  part[threadIdx.x] = local;
  __syncthreads();
  for (unsigned w = blockDim.x / 2; w > 0; w /= 2) {
    if (threadIdx.x < w) part[threadIdx.x] += part[threadIdx.x + w];
    __syncthreads();
  }
  if (threadIdx.x == 0) atomicAdd(sum, part[0]);  // modulo 2^64: order-free
}

__global__ void gather_kernel(TensorRef s, i64 lo0, i64 lo1, i64 lo2, i64 lo3, i64 n1, i64 n2, i64 n3, i64 n, float* out) {
  for (i64 e = static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x; e < n; e += static_cast<i64>(gridDim.x) * blockDim.x) {
    const i64 i3 = e % n3, i2 = (e / n3) % n2, i1 = (e / (n3 * n2)) % n1, i0 = e / (n3 * n2 * n1);
    out[e] = static_cast<float>(elem::load(s, s.offset(lo0 + i0, lo1 + i1, lo2 + i2, lo3 + i3)));
  }
}

constexpr int kBlockThreads = 256;

// One thread block per (i0, i2, row block): each thread sums its own elements in a fixed order,
// then a fixed-shape tree merges the 256 partial sums (deterministic, no atomics).
__global__ void block_errors_kernel(TensorRef t, TensorRef r, i64 rows, i64 nblk, ErrSums* out) {
  // Raw storage: a __shared__ array may not have a constructor (ErrSums has member initialisers).
  __shared__ alignas(8) unsigned char raw[kBlockThreads * sizeof(ErrSums)];
  ErrSums* part = reinterpret_cast<ErrSums*>(raw);
  const i64 id = blockIdx.x;
  const i64 blk = id % nblk, i2 = (id / nblk) % t.shape[2], i0 = id / (nblk * t.shape[2]);
  const i64 r0 = blk * rows, r1 = r0 + rows < t.shape[1] ? r0 + rows : t.shape[1];
  const int D = static_cast<int>(t.shape[3]), n = static_cast<int>((r1 - r0) * D);
  ErrSums s;
  for (int e = static_cast<int>(threadIdx.x); e < n; e += kBlockThreads) {
    const i64 i1 = r0 + e / D, i3 = e % D;
    s.add(elem::load(t, t.offset(i0, i1, i2, i3)), elem::load(r, r.offset(i0, i1, i2, i3)));
  }
  part[threadIdx.x] = s;
  __syncthreads();
  for (int w = kBlockThreads / 2; w > 0; w /= 2) {
    if (static_cast<int>(threadIdx.x) < w) part[threadIdx.x].merge(part[threadIdx.x + w]);
    __syncthreads();
  }
  if (threadIdx.x == 0) out[id] = part[0];
}

// One scratch per host thread and purpose, grown on demand: a gated call compares once per
// rerun, and a cudaMalloc/cudaFree pair per comparison cost more than the comparison itself.
DeviceBuffer& scratch(std::size_t bytes, int which = 0) {
  thread_local DeviceBuffer buf[2];
  if (buf[which].bytes() < bytes) buf[which] = DeviceBuffer(bytes);
  return buf[which];
}

int grid_for(i64 n) {
  const i64 blocks = (n + 255) / 256;
  return static_cast<int>(blocks < 65536 ? (blocks > 0 ? blocks : 1) : 65536);
}

void expect_type(const TensorRef& t, const char* what, bool f64_ok) {
  if (t.dtype != DType::f32 && t.dtype != DType::bf16 && t.dtype != DType::f16 && !(f64_ok && t.dtype == DType::f64))
    throw Error(std::string(what) + ": element type " + std::string(dtype_name(t.dtype)) + " is not f32, bf16 or f16");
}

int threads_for(i64 n3) { return n3 >= 256 ? 256 : n3 > 64 ? 128 : 64; }

}  // namespace

CmpFigures compare_device(const TensorRef& a, const TensorRef& b) {
  if (a.data == nullptr) throw Error("compare_device: tensor a is NULL");
  expect_type(a, "compare_device", false);
  if (b.data != nullptr) expect_type(b, "compare_device", false);
  for (int i = 0; i < 4; ++i) {
    if (a.shape[i] < 0) throw Error("compare_device: negative extent");
    if (b.data != nullptr && b.shape[i] != a.shape[i])
      throw Error("compare_device: shapes differ in dimension " + std::to_string(i) + " (" + std::to_string(a.shape[i]) +
                  " vs " + std::to_string(b.shape[i]) + ")");
  }
  const i64 n = a.numel();
  CmpFigures f;
  f.count = n;
  if (n == 0) return f;
  DeviceBuffer& acc = scratch(sizeof(Acc));
  const Acc init{0, 0, ~0ull, 0};
  acc.upload(&init, sizeof(init));
  const i64 rows = a.shape[0] * a.shape[1] * a.shape[2];
  compare_kernel<<<static_cast<int>(rows < 1048576 ? rows : 1048576), threads_for(a.shape[3])>>>(a, b, rows, acc.as<Acc>());
  ATTEST_GPU_CHECK_LAUNCH();
  Acc r{};
  acc.download(&r, sizeof(r));  // synchronous: also surfaces an asynchronous fault here
  f.bit_diff = static_cast<i64>(r.bit_diff);
  f.nonfinite_a = static_cast<i64>(r.nonfinite_a);
  f.first = r.first == ~0ull ? -1 : static_cast<i64>(r.first);
  f.max_abs = static_cast<double>(std::bit_cast<float>(static_cast<unsigned>(r.max_abs_bits)));
  return f;
}

std::uint64_t checksum_device(const TensorRef& t) {
  if (t.data == nullptr) throw Error("checksum_device: tensor is NULL");
  const i64 rows = t.shape[0] * t.shape[1] * t.shape[2];
  if (rows == 0 || t.shape[3] == 0) return 0;
  DeviceBuffer& acc = scratch(sizeof(u64));
  const u64 zero = 0;
  acc.upload(&zero, sizeof(zero));
  checksum_kernel<<<static_cast<int>(rows < 8192 ? rows : 8192), threads_for(t.shape[3])>>>(t, rows, acc.as<u64>());
  ATTEST_GPU_CHECK_LAUNCH();
  u64 s = 0;
  acc.download(&s, sizeof(s));
  return s;
}

void gather_f32(const TensorRef& src, const std::int64_t lo[4], const std::int64_t hi[4], float* host_out) {
  expect_type(src, "gather_f32", true);
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

struct Deferred::Impl {
  DeviceBuffer slots;
  std::vector<Acc> host;
  std::vector<i64> counts;
  hipStream_t stream = nullptr;
  int used = 0;
  int take(i64 count) {
    if (used >= static_cast<int>(host.size()))
      throw Error("deferred comparisons: all " + std::to_string(host.size()) + " slots are used");
    counts[static_cast<std::size_t>(used)] = count;
    return used++;
  }
};

Deferred::Deferred(int slots, void* stream) {
  auto impl = std::make_unique<Impl>();  // nothing leaks if an allocation below throws
  impl->slots = DeviceBuffer(static_cast<std::size_t>(slots) * sizeof(Acc));
  impl->host.assign(static_cast<std::size_t>(slots), Acc{0, 0, ~0ull, 0});
  impl->counts.assign(static_cast<std::size_t>(slots), 0);
  impl->stream = static_cast<hipStream_t>(stream);
  // The initial slot values go in on the caller's stream, so that the launches queued on it
  // later are ordered after them (a copy on the legacy stream is not, for a non-blocking stream).
  if (hipMemcpyAsync(impl->slots.data(), impl->host.data(), impl->host.size() * sizeof(Acc), hipMemcpyHostToDevice,
                     impl->stream) != hipSuccess)
    throw Error("deferred comparisons: initialising the slots failed");
  impl_ = impl.release();
}

Deferred::~Deferred() { delete impl_; }

int Deferred::compare(const TensorRef& a, const TensorRef& b) {
  expect_type(a, "compare", false);
  expect_type(b, "compare", false);
  for (int i = 0; i < 4; ++i)
    if (a.shape[i] != b.shape[i]) throw Error("compare: shapes differ in dimension " + std::to_string(i));
  const int slot = impl_->take(a.numel());
  const i64 rows = a.shape[0] * a.shape[1] * a.shape[2];
  if (rows > 0 && a.shape[3] > 0) {
    compare_kernel<<<static_cast<int>(rows < 1048576 ? rows : 1048576), threads_for(a.shape[3]), 0, impl_->stream>>>(
        a, b, rows, impl_->slots.as<Acc>() + slot);
    ATTEST_GPU_CHECK_LAUNCH();
  }
  return slot;
}

int Deferred::checksum(const TensorRef& t) {
  if (t.data == nullptr) throw Error("checksum: tensor is NULL");
  const int slot = impl_->take(t.numel());
  const i64 rows = t.shape[0] * t.shape[1] * t.shape[2];
  // The slot's first word starts at 0 (bit_diff): the sum accumulates there.
  if (rows > 0 && t.shape[3] > 0) {
    checksum_kernel<<<static_cast<int>(rows < 8192 ? rows : 8192), threads_for(t.shape[3]), 0, impl_->stream>>>(
        t, rows, reinterpret_cast<u64*>(impl_->slots.as<Acc>() + slot));
    ATTEST_GPU_CHECK_LAUNCH();
  }
  return slot;
}

void Deferred::collect() {
  // A synchronous copy on the legacy default stream waits for `stream` only if it is blocking:
  // synchronise it first.
  if (hipStreamSynchronize(impl_->stream) != hipSuccess) throw Error("deferred comparisons: stream synchronisation failed");
  impl_->slots.download(impl_->host.data(), static_cast<std::size_t>(impl_->used) * sizeof(Acc));
}

CmpFigures Deferred::figures(int slot) const {
  const Acc& r = impl_->host.at(static_cast<std::size_t>(slot));
  CmpFigures f;
  f.count = impl_->counts.at(static_cast<std::size_t>(slot));
  f.bit_diff = static_cast<i64>(r.bit_diff);
  f.nonfinite_a = static_cast<i64>(r.nonfinite_a);
  f.first = r.first == ~0ull ? -1 : static_cast<i64>(r.first);
  f.max_abs = static_cast<double>(std::bit_cast<float>(static_cast<unsigned>(r.max_abs_bits)));
  return f;
}

std::uint64_t Deferred::sum(int slot) const { return impl_->host.at(static_cast<std::size_t>(slot)).bit_diff; }

void block_errors_device(const TensorRef& test, const TensorRef& ref, std::int64_t rows, ErrSums* host_out) {
  expect_type(test, "block_errors_device", true);
  expect_type(ref, "block_errors_device", true);
  for (int i = 0; i < 4; ++i)
    if (test.shape[i] != ref.shape[i])
      throw Error("block_errors_device: shapes differ in dimension " + std::to_string(i));
  if (rows < 1 || rows * test.shape[3] > (1ll << 30)) throw Error("block_errors_device: rows per block out of range");
  const i64 nblk = (test.shape[1] + rows - 1) / rows, n = test.shape[0] * test.shape[2] * nblk;
  if (n == 0) return;
  if (n > 0x7FFFFFFF) throw Error("block_errors_device: too many blocks for one launch");
  DeviceBuffer& buf = scratch(static_cast<std::size_t>(n) * sizeof(ErrSums), 1);
  block_errors_kernel<<<static_cast<int>(n), kBlockThreads>>>(test, ref, rows, nblk, buf.as<ErrSums>());
  ATTEST_GPU_CHECK_LAUNCH();
  buf.download(host_out, static_cast<std::size_t>(n) * sizeof(ErrSums));
}

}  // namespace attest::gpu
