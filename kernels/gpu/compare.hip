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

// Rows (i0, i1, i2) of a tensor, visited in order from a start row: the logical index is split
// once per block and then carried like an odometer. (One 64-bit division per row cost more than
// the comparison of its 128 elements: compare and checksum ran at ~7% of memory bandwidth.)
struct RowCursor {
  i64 i0, i1, i2;
  __device__ RowCursor(const TensorRef& t, i64 r)
      : i0(r / (t.shape[2] * t.shape[1])), i1((r / t.shape[2]) % t.shape[1]), i2(r % t.shape[2]) {}
  __device__ void next(const TensorRef& t) {
    if (++i2 < t.shape[2]) return;
    i2 = 0;
    if (++i1 < t.shape[1]) return;
    i1 = 0;
    ++i0;
  }
};

// The rows [r0, r1) of this block: contiguous chunks, one per block.
__device__ inline void block_rows(i64 rows, i64& r0, i64& r1) {
  const i64 per = (rows + gridDim.x - 1) / gridDim.x;
  r0 = static_cast<i64>(blockIdx.x) * per;
  r1 = r0 + per < rows ? r0 + per : rows;
}

// One element of a comparison of a with b (b absent: the NaN/Inf scan of a alone), counted into
// the slot by atomics (elem::pair_diff is the host's code too).
__device__ inline void compare_one(Acc* acc, DType ta, u64 ba, DType tb, u64 bb, bool has_b, i64 e) {
  const elem::PairDiff d = elem::pair_diff(ta, ba, has_b ? tb : ta, has_b ? bb : ba);
  if (d.nonfinite_a) atomicAdd(&acc->nonfinite_a, 1ull);
  if (!has_b) {
    if (d.nonfinite_a) atomicMin(&acc->first, static_cast<u64>(e));
    return;
  }
  if (d.differs) {
    atomicAdd(&acc->bit_diff, 1ull);
    atomicMin(&acc->first, static_cast<u64>(e));
    // Non-negative floats order as their bit patterns: atomicMax on the bits is a float max.
    if (d.abs_diff - d.abs_diff == 0.0) atomicMax(&acc->max_abs_bits, static_cast<u64>(elem::bits_as<std::uint64_t>(d.abs_diff)));
  }
}

// Element j of a 16-byte word holding elements of `es` bytes, zero-extended (j a constant after
// unrolling: no local-memory indexing).
__device__ inline u64 word_bits(const uint4& w, int es, int j) {
  const unsigned u[4] = {w.x, w.y, w.z, w.w};
  if (es == 8) return static_cast<u64>(u[(2 * j) & 3]) | (static_cast<u64>(u[(2 * j + 1) & 3]) << 32);
  if (es == 4) return u[j & 3];
  return (u[(j >> 1) & 3] >> (16 * (j & 1))) & 0xFFFFu;
}

// Word walk (the vectorised kernels): the block's rows as 16-byte words, 32-bit index arithmetic
// (words_ok checks rows < 2^31, a block's word count < 2^32 and the 16-byte alignment of every
// row). Calls f(r, word column c, i0, i1, i2) for each word; f loads what it needs.
template <class F>
__device__ inline void for_words(const TensorRef& a, i64 rows, int epw, F&& f) {
  i64 r0, r1;
  block_rows(rows, r0, r1);
  if (r0 >= r1) return;
  const unsigned gpr = static_cast<unsigned>(a.shape[3] / epw), s2 = static_cast<unsigned>(a.shape[2]),
                 s1 = static_cast<unsigned>(a.shape[1]);
  const unsigned total = static_cast<unsigned>(r1 - r0) * gpr;
  for (unsigned g = threadIdx.x; g < total; g += blockDim.x) {
    const unsigned ur = static_cast<unsigned>(r0) + g / gpr, c = g % gpr;
    const unsigned i2 = ur % s2, t = ur / s2, i1 = t % s1, i0 = t / s1;
    f(static_cast<i64>(ur), c, i0, i1, i2);
  }
}

__device__ inline uint4 load_word(const TensorRef& t, unsigned i0, unsigned i1, unsigned i2, i64 i3, int es) {
  return *reinterpret_cast<const uint4*>(static_cast<const char*>(t.data) + t.offset(i0, i1, i2, i3) * es);
}

// Threads along i3, rows of the block's chunk in order.
__global__ void compare_kernel(TensorRef a, TensorRef b, i64 rows, Acc* acc) {
  const i64 n3 = a.shape[3];
  i64 r0, r1;
  block_rows(rows, r0, r1);
  if (r0 >= r1) return;
  const bool has_b = b.data != nullptr;
  RowCursor c(a, r0);
  for (i64 r = r0; r < r1; ++r, c.next(a)) {
    const i64 ra = a.offset(c.i0, c.i1, c.i2, 0), rb = has_b ? b.offset(c.i0, c.i1, c.i2, 0) : 0;
    for (i64 i3 = threadIdx.x; i3 < n3; i3 += blockDim.x)
      compare_one(acc, a.dtype, elem::bits(a, ra + i3 * a.stride[3]), b.dtype, has_b ? elem::bits(b, rb + i3 * b.stride[3]) : 0,
                  has_b, r * n3 + i3);
  }
}

// The same comparison, 16 bytes per load (a and b of one type, rows contiguous and aligned).
__global__ void compare_vec_kernel(TensorRef a, TensorRef b, i64 rows, Acc* acc) {
  const int es = elem::bytes(a.dtype), epw = 16 / es;
  const bool has_b = b.data != nullptr;
  for_words(a, rows, epw, [&](i64 r, unsigned c, unsigned i0, unsigned i1, unsigned i2) {
    const uint4 wa = load_word(a, i0, i1, i2, static_cast<i64>(c) * epw, es);
    const uint4 wb = has_b ? load_word(b, i0, i1, i2, static_cast<i64>(c) * epw, es) : uint4{0, 0, 0, 0};
#pragma unroll
    for (int j = 0; j < 8; ++j)
      if (j < epw)
        compare_one(acc, a.dtype, word_bits(wa, es, j), b.dtype, word_bits(wb, es, j), has_b, r * a.shape[3] + c * epw + j);
  });
}

// Sum of the block's partial sums: one atomic per block, not per thread (millions of same-address
// atomics serialise in L2: with one per thread the guarded calls cost ~20 ms of harness each on an
// H100 at b1h24s8192d128, docs/results/complete-gpu).
__device__ inline void add_block_sum(u64 local, u64* sum) {
  // blockDim.x is a power of two <= 256 (threads_for).
  __shared__ u64 part[256];
  part[threadIdx.x] = local;
  __syncthreads();
  for (unsigned w = blockDim.x / 2; w > 0; w /= 2) {
    if (threadIdx.x < w) part[threadIdx.x] += part[threadIdx.x + w];
    __syncthreads();
  }
  if (threadIdx.x == 0 && part[0] != 0) atomicAdd(sum, part[0]);  // modulo 2^64: order-free
}

__global__ void checksum_kernel(TensorRef a, i64 rows, u64* sum) {
  const i64 n3 = a.shape[3];
  u64 local = 0;
  i64 r0, r1;
  block_rows(rows, r0, r1);
  if (r0 < r1) {
    RowCursor c(a, r0);
    for (i64 r = r0; r < r1; ++r, c.next(a)) {
      const i64 ra = a.offset(c.i0, c.i1, c.i2, 0);
      for (i64 i3 = threadIdx.x; i3 < n3; i3 += blockDim.x)
        local += elem::checksum_term(elem::bits(a, ra + i3 * a.stride[3]), static_cast<std::uint64_t>(r * n3 + i3));
    }
  }
  add_block_sum(local, sum);
}

__global__ void checksum_vec_kernel(TensorRef a, i64 rows, u64* sum) {
  const int es = elem::bytes(a.dtype), epw = 16 / es;
  u64 local = 0;
  for_words(a, rows, epw, [&](i64 r, unsigned c, unsigned i0, unsigned i1, unsigned i2) {
    const uint4 w = load_word(a, i0, i1, i2, static_cast<i64>(c) * epw, es);
#pragma unroll
    for (int j = 0; j < 8; ++j)
      if (j < epw) local += elem::checksum_term(word_bits(w, es, j), static_cast<std::uint64_t>(r * a.shape[3] + c * epw + j));
  });
  add_block_sum(local, sum);
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
__global__ void block_errors_kernel(TensorRef t, TensorRef r, i64 rows, i64 nblk, double flush_below, double zero_below,
                                    ErrSums* out) {
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
    s.add(elem::load(t, t.offset(i0, i1, i2, i3)), elem::load(r, r.offset(i0, i1, i2, i3)), flush_below, zero_below);
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

// Blocks for a row-chunked kernel: enough to fill any current GPU (a few per SM), few enough
// that each block's chunk amortises its one index split.
int row_grid(i64 rows) { return static_cast<int>(rows < 2048 ? (rows > 0 ? rows : 1) : 2048); }

// Whether the word kernels may read t: rows of whole, 16-byte aligned words and 32-bit row indices.
bool words_ok(const TensorRef& t, i64 rows) {
  const int es = elem::bytes(t.dtype);
  if (t.stride[3] != 1 || (t.shape[3] * es) % 16 != 0 || reinterpret_cast<std::uintptr_t>(t.data) % 16 != 0) return false;
  for (int i = 0; i < 3; ++i)
    if (t.shape[i] > 1 && (t.stride[i] * es) % 16 != 0) return false;
  // for_words counts a block's words in 32 bits: rows per block x words per row, with room for
  // the last stride of the loop.
  const i64 per = (rows + row_grid(rows) - 1) / row_grid(rows), words = per * (t.shape[3] * es / 16);
  return rows < (i64{1} << 31) && words <= i64{0xFFFFFFFF} - 1024;
}

constexpr int kWordThreads = 256;

void launch_compare(const TensorRef& a, const TensorRef& b, i64 rows, Acc* acc, hipStream_t st) {
  if (words_ok(a, rows) && (b.data == nullptr || (b.dtype == a.dtype && words_ok(b, rows))))
    compare_vec_kernel<<<row_grid(rows), kWordThreads, 0, st>>>(a, b, rows, acc);
  else
    compare_kernel<<<row_grid(rows), threads_for(a.shape[3]), 0, st>>>(a, b, rows, acc);
  ATTEST_GPU_CHECK_LAUNCH();
}

void launch_checksum(const TensorRef& t, i64 rows, u64* sum, hipStream_t st) {
  if (words_ok(t, rows)) checksum_vec_kernel<<<row_grid(rows), kWordThreads, 0, st>>>(t, rows, sum);
  else checksum_kernel<<<row_grid(rows), threads_for(t.shape[3]), 0, st>>>(t, rows, sum);
  ATTEST_GPU_CHECK_LAUNCH();
}

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
  launch_compare(a, b, rows, acc.as<Acc>(), nullptr);
  Acc r{};
  acc.download(&r, sizeof(r));  // synchronous: also surfaces an asynchronous fault here
  f.bit_diff = static_cast<i64>(r.bit_diff);
  f.nonfinite_a = static_cast<i64>(r.nonfinite_a);
  f.first = r.first == ~0ull ? -1 : static_cast<i64>(r.first);
  f.max_abs = std::bit_cast<double>(static_cast<std::uint64_t>(r.max_abs_bits));
  return f;
}

std::uint64_t checksum_device(const TensorRef& t) {
  if (t.data == nullptr) throw Error("checksum_device: tensor is NULL");
  expect_type(t, "checksum_device", true);  // the kernels read 2, 4 or 8 bytes per element
  const i64 rows = t.shape[0] * t.shape[1] * t.shape[2];
  if (rows == 0 || t.shape[3] == 0) return 0;
  DeviceBuffer& acc = scratch(sizeof(u64));
  const u64 zero = 0;
  acc.upload(&zero, sizeof(zero));
  launch_checksum(t, rows, acc.as<u64>(), nullptr);
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
    launch_compare(a, b, rows, impl_->slots.as<Acc>() + slot, impl_->stream);
  }
  return slot;
}

int Deferred::checksum(const TensorRef& t) {
  if (t.data == nullptr) throw Error("checksum: tensor is NULL");
  expect_type(t, "checksum", true);  // the kernels read 2, 4 or 8 bytes per element
  const int slot = impl_->take(t.numel());
  const i64 rows = t.shape[0] * t.shape[1] * t.shape[2];
  // The slot's first word starts at 0 (bit_diff): the sum accumulates there.
  if (rows > 0 && t.shape[3] > 0) {
    launch_checksum(t, rows, reinterpret_cast<u64*>(impl_->slots.as<Acc>() + slot), impl_->stream);
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
  f.max_abs = std::bit_cast<double>(static_cast<std::uint64_t>(r.max_abs_bits));
  return f;
}

std::uint64_t Deferred::sum(int slot) const { return impl_->host.at(static_cast<std::size_t>(slot)).bit_diff; }

void block_errors_device(const TensorRef& test, const TensorRef& ref, std::int64_t rows, ErrSums* host_out,
                         double flush_below, double zero_below) {
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
  block_errors_kernel<<<static_cast<int>(n), kBlockThreads>>>(test, ref, rows, nblk, flush_below, zero_below, buf.as<ErrSums>());
  ATTEST_GPU_CHECK_LAUNCH();
  buf.download(host_out, static_cast<std::size_t>(n) * sizeof(ErrSums));
}

}  // namespace attest::gpu
