// Device data generation: one thread per element, each a call of the shared host/device element
// function datasets::sample_element. Compiled without FMA contraction (see CMakeLists.txt), so
// the device performs the same correctly rounded operations in the same order as the CPU.
#include "attest/kernels/gpu/generate_qkv.hpp"

#include <string>

#include "attest/datasets/sample.hpp"
#include "runtime.hpp"

namespace attest::gpu {
namespace {

using i64 = std::int64_t;

struct GenArgs {
  datasets::Distribution dist;
  datasets::Role role;
  std::uint64_t seed;
  datasets::SampleShape shape;
  i64 batch, rows, heads, dim;
  const i64* cu;     // this role's cu_seqlens (device) or nullptr
  const i64* cu_kv;  // for len_kv(b) (device) or nullptr
  float* out;
};

__global__ void generate_kernel(GenArgs a) {
  const i64 n = a.rows * a.heads * a.dim;
  for (i64 e = static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x; e < n; e += static_cast<i64>(gridDim.x) * blockDim.x) {
    const i64 row = e / (a.heads * a.dim), h = (e / a.dim) % a.heads, d = e % a.dim;
    i64 b = 0, s = 0;
    if (a.cu != nullptr) {
      // Largest b with cu[b] <= row (the same element generate_qkv finds with upper_bound).
      i64 lo = 0, hi = a.batch;
      while (hi - lo > 1) {
        const i64 mid = (lo + hi) / 2;
        if (a.cu[mid] <= row) lo = mid;
        else hi = mid;
      }
      b = lo;
      s = row - a.cu[b];
    } else {
      const i64 smax = a.role == datasets::Role::q ? a.shape.seqlen_q : a.shape.seqlen_kv;
      b = row / smax;
      s = row % smax;
    }
    const i64 len_kv_b = a.cu_kv != nullptr ? a.cu_kv[b + 1] - a.cu_kv[b] : a.shape.seqlen_kv;
    a.out[e] = datasets::sample_element(a.dist, a.role, a.seed, a.shape, len_kv_b, b, s, h, d);
  }
}

}  // namespace

void generate_qkv_device(const Problem& p, datasets::Distribution dist, std::uint64_t seed, float* q, float* k,
                         float* v, const std::int64_t* cu_q, const std::int64_t* cu_kv, void* stream) {
  if (auto st = p.validate(); !st) throw Error("generate_qkv_device: problem '" + to_string(p) + "': " + st.reason());
  if (static_cast<std::size_t>(dist) >= datasets::all_distributions().size())
    throw Error("generate_qkv_device: invalid distribution value " + std::to_string(static_cast<int>(dist)));
  if (p.ragged() && (cu_q == nullptr || cu_kv == nullptr))
    throw Error("generate_qkv_device: ragged problem '" + to_string(p) + "' needs device cu_q and cu_kv");
  const auto st = static_cast<hipStream_t>(stream);
  const datasets::SampleShape shape = datasets::sample_shape(p);
  for (const datasets::Role r : {datasets::Role::q, datasets::Role::k, datasets::Role::v}) {
    GenArgs a{};
    a.dist = dist;
    a.role = r;
    a.seed = seed;
    a.shape = shape;
    a.batch = p.batch;
    const bool is_q = r == datasets::Role::q;
    a.heads = is_q ? p.heads_q : p.heads_kv;
    a.dim = r == datasets::Role::v ? p.head_dim_v : p.head_dim;
    a.rows = p.ragged() ? (is_q ? p.cu_seqlens_q.back() : p.cu_seqlens_kv.back()) : p.batch * (is_q ? p.seqlen_q : p.seqlen_kv);
    a.cu = p.ragged() ? (is_q ? cu_q : cu_kv) : nullptr;
    a.cu_kv = p.ragged() ? cu_kv : nullptr;
    a.out = is_q ? q : (r == datasets::Role::k ? k : v);
    const i64 n = a.rows * a.heads * a.dim;
    if (n == 0) continue;
    const i64 blocks = (n + 255) / 256 < 65536 ? (n + 255) / 256 : 65536;
    generate_kernel<<<static_cast<unsigned>(blocks), 256, 0, st>>>(a);
    ATTEST_GPU_CHECK_LAUNCH();
  }
}

}  // namespace attest::gpu
