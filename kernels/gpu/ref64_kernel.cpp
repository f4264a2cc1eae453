// gpu.ref64: the registry entry of the device FP64 reference (attn_fwd_ref64.hip).
// run() (host Tensors): each distinct buffer behind q/k/v/out/lse is copied to the device whole
// (so views, packed layouts, strides, padding, poison and canaries keep their exact byte
// positions), the kernel runs through its device-pointer entry point, and the buffers behind out
// and lse are copied back whole: bytes the kernel does not own come back unchanged.
// device() (device_entry.hpp): the same entry point on contiguous f32 device buffers, enqueued
// on the caller's stream, for the device checks and `attest bench`.
#include <map>
#include <memory>
#include <tuple>
#include <vector>

#include "attest/kernels/device_entry.hpp"
#include "attest/kernels/gpu/attn_fwd_ref64.hpp"
#include "attest/kernels/gpu/device.hpp"
#include "attest/kernels/gpu/host_mirror.hpp"
#include "attest/kernels/kernel.hpp"

namespace attest::kernels::gpu_ref64 {
namespace {

constexpr const char* kF32Recipe = "q=f32;k=f32;v=f32;p=f32;out=f32";

/// A contiguous f32 device tensor of `tokens` x `heads` x `dim` per batch element.
TensorRef contiguous(const void* p, std::int64_t tokens, std::int64_t heads, std::int64_t dim) {
  TensorRef t;
  t.data = p;
  t.dtype = DType::f32;
  t.device = true;
  t.stride[0] = tokens * heads * dim, t.stride[1] = heads * dim, t.stride[2] = dim, t.stride[3] = 1;
  return t;
}

class Ref64Device final : public DeviceEntry {
 public:
  void enqueue(const Problem& p, const Recipe& r, const DeviceIo& io, void* stream) const override {
    (void)r;
    const bool rg = p.ragged();
    const std::int64_t tq = rg ? p.cu_seqlens_q.back() : p.seqlen_q;
    const std::int64_t tk = rg ? p.cu_seqlens_kv.back() : p.seqlen_kv;
    gpu::Ref64Args a = gpu::ref64_args(p);
    a.q = contiguous(io.q, tq, p.heads_q, p.head_dim);
    a.k = contiguous(io.k, tk, p.heads_kv, p.head_dim);
    a.v = contiguous(io.v, tk, p.heads_kv, p.head_dim_v);
    a.out = contiguous(io.out, tq, p.heads_q, p.head_dim_v);
    if (io.lse != nullptr) {
      a.lse.data = io.lse;
      a.lse.dtype = DType::f32;
      a.lse.device = true;
      a.lse.stride[0] = p.heads_q * tq, a.lse.stride[1] = tq, a.lse.stride[2] = 1;
    }
    a.cu_q = io.cu_q;
    a.cu_kv = io.cu_kv;
    gpu::attn_fwd_ref64(a, gpu::Ref64Path::automatic, stream);
  }
};

void check_tensor(const Tensor& t, const char* what, const Shape& want) {
  if (t.dtype() != DType::f32 && t.dtype() != DType::f64)
    throw Error(std::string("gpu.ref64: ") + what + ": expected f32 or f64, got " + std::string(dtype_name(t.dtype())));
  if (t.shape() != want)
    throw Error(std::string("gpu.ref64: ") + what + ": expected shape " + shape_string(want) + ", got " + shape_string(t.shape()));
}

class Ref64 final : public Kernel {
 public:
  std::string name() const override { return "gpu.ref64"; }
  std::string backend() const override { return gpu::backend_name(); }
  std::vector<std::string> recipes() const override { return {recipe_label(parse_recipe(kF32Recipe))}; }
  Capabilities capabilities() const override {
    Capabilities c;
    c.deterministic = true;  // fixed summation order, no atomics
    c.bitwise = false;
    c.graph_capturable = false;  // run() copies host Tensors in and out (device() is what graphs capture)
    if (gpu::device_count() == 0) c.unavailable = "no GPU device (or no driver) on this host";
    return c;
  }
  Status supports(const Problem& p, const Recipe& r) const override {
    if (auto st = Kernel::supports(p, r); !st) return st;
    if (gpu::device_count() == 0) return Status::unsupported("no GPU device (or no driver) on this host");
    return Status::ok();
  }
  const DeviceEntry* device() const override { return &device_; }

  void run(const Args& a) override {
    const Problem& p = a.problem;
    if (auto st = supports(p, a.recipe); !st) throw Error(name() + ": " + st.reason());
    const bool rg = p.ragged();
    const std::int64_t bq = rg ? 1 : p.batch;
    const std::int64_t tq = rg ? p.cu_seqlens_q.back() : p.seqlen_q;
    const std::int64_t tk = rg ? p.cu_seqlens_kv.back() : p.seqlen_kv;
    check_tensor(a.q, "q", {bq, tq, p.heads_q, p.head_dim});
    check_tensor(a.k, "k", {bq, tk, p.heads_kv, p.head_dim});
    check_tensor(a.v, "v", {bq, tk, p.heads_kv, p.head_dim_v});
    check_tensor(a.out, "out", {bq, tq, p.heads_q, p.head_dim_v});
    if (a.lse != nullptr) check_tensor(*a.lse, "lse", {bq, p.heads_q, tq});
    if (a.q.dtype() != a.k.dtype() || a.q.dtype() != a.v.dtype()) throw Error("gpu.ref64: q, k and v must have one dtype");

    gpu::HostMirror mirror;
    auto device_view = [&](const Tensor& t) {
      TensorRef d;
      d.data = mirror.address(t);
      d.dtype = t.dtype() == DType::f64 ? DType::f64 : DType::f32;  // validate() refuses the rest
      d.device = true;
      for (int i = 0; i < t.rank() && i < 4; ++i) d.stride[i] = t.strides()[static_cast<std::size_t>(i)];
      return d;
    };

    gpu::Ref64Args args = gpu::ref64_args(p);
    args.q = device_view(a.q);
    args.k = device_view(a.k);
    args.v = device_view(a.v);
    args.out = device_view(a.out);
    if (a.lse != nullptr) args.lse = device_view(*a.lse);
    std::tie(args.cu_q, args.cu_kv) = mirror.cu_seqlens(p);
    gpu::attn_fwd_ref64(args, config_path(a.config));
    gpu::synchronize();
    mirror.download(a.out);
    if (a.lse != nullptr) mirror.download(*a.lse);
  }

 private:
  static gpu::Ref64Path config_path(std::string_view config) {
    if (config.empty()) return gpu::Ref64Path::automatic;
    throw Error("gpu.ref64: unknown config '" + std::string(config) + "' (valid: \"\")");
  }

  Ref64Device device_;
};

ATTEST_REGISTER_KERNEL(Ref64);

}  // namespace
}  // namespace attest::kernels::gpu_ref64
