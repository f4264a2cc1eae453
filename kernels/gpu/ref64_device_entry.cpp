// gpu.ref64's device entry point (device_entry.hpp): the conformance graph and device-memory
// checks enqueue it on a stream with contiguous f32 device buffers.
#include "attest/kernels/gpu/attn_fwd_ref64.hpp"
#include "attest/kernels/gpu/device_entry.hpp"

namespace attest::gpu {
namespace {

DeviceTensor contiguous(const void* p, std::int64_t tokens, std::int64_t heads, std::int64_t dim) {
  DeviceTensor t;
  t.data = const_cast<void*>(p);
  t.type = ElemType::f32;
  t.stride[0] = tokens * heads * dim, t.stride[1] = heads * dim, t.stride[2] = dim, t.stride[3] = 1;
  return t;
}

class Ref64Entry final : public DeviceEntry {
 public:
  void enqueue(const Problem& p, const Recipe& r, const DeviceIo& io, void* stream) const override {
    (void)r;
    const bool rg = p.ragged();
    const std::int64_t tq = rg ? p.cu_seqlens_q.back() : p.seqlen_q;
    const std::int64_t tk = rg ? p.cu_seqlens_kv.back() : p.seqlen_kv;
    Ref64Args a = ref64_args(p);
    a.q = contiguous(io.q, tq, p.heads_q, p.head_dim);
    a.k = contiguous(io.k, tk, p.heads_kv, p.head_dim);
    a.v = contiguous(io.v, tk, p.heads_kv, p.head_dim_v);
    a.out = contiguous(io.out, tq, p.heads_q, p.head_dim_v);
    if (io.lse != nullptr) {
      a.lse.data = io.lse;
      a.lse.type = ElemType::f32;
      a.lse.stride[0] = p.heads_q * tq, a.lse.stride[1] = tq, a.lse.stride[2] = 1;
    }
    a.cu_q = io.cu_q;
    a.cu_kv = io.cu_kv;
    attn_fwd_ref64(a, Ref64Path::automatic, stream);
  }
};

ATTEST_REGISTER_DEVICE_ENTRY("gpu.ref64", std::make_unique<Ref64Entry>());

}  // namespace
}  // namespace attest::gpu
