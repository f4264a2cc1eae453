// DeviceLaunch of gpu.ref64 for `attest bench` (GPU builds only): inputs uploaded once as f32
// bshd copies, launches through the same device-pointer entry point gpu.ref64's run() uses
// (kernels/gpu/attn_fwd_ref64.hpp), so the bench times the kernel and nothing else. It lives
// here, not beside the kernel, because it is the bench's only consumer; a device kernel of
// another issue registers its own with ATTEST_REGISTER_DEVICE_LAUNCH in its file.
#include <cstring>
#include <vector>

#include "attest/kernels/device_launch.hpp"
#include "attest/kernels/gpu/attn_fwd_ref64.hpp"
#include "attest/kernels/gpu/device.hpp"

namespace attest::conformance {

namespace {

class Ref64Launch final : public kernels::DeviceLaunch {
 public:
  Ref64Launch(const kernels::Args& a, int copies) : p_(a.problem) {
    const bool rg = p_.ragged();
    for (const Tensor* t : {&a.q, &a.k, &a.v})
      if (t->dtype() != DType::f32 || t->strides() != contiguous_strides(t->shape()))
        throw Error("gpu.ref64 bench: inputs must be contiguous f32");
    auto upload = [](const Tensor& t) {
      gpu::DeviceBuffer b(t.storage().size());
      b.upload(t.storage().data(), t.storage().size());
      return b;
    };
    for (int c = 0; c < copies; ++c) {
      q_.push_back(upload(a.q));
      k_.push_back(upload(a.k));
      v_.push_back(upload(a.v));
    }
    out_ = gpu::DeviceBuffer(static_cast<std::size_t>(a.out.numel()) * 4);
    out_shape_ = a.out.shape();
    if (a.lse) lse_ = gpu::DeviceBuffer(static_cast<std::size_t>(a.lse->numel()) * 4);
    if (rg) {
      std::vector<std::int64_t> host(p_.cu_seqlens_q);
      host.insert(host.end(), p_.cu_seqlens_kv.begin(), p_.cu_seqlens_kv.end());
      cu_ = gpu::DeviceBuffer(host.size() * sizeof(std::int64_t));
      cu_.upload(host.data(), cu_.bytes());
    }
  }
  void launch(int i) override {
    const auto& p = p_;
    const bool rg = p.ragged();
    const std::int64_t tq = rg ? p.cu_seqlens_q.back() : p.seqlen_q, tk = rg ? p.cu_seqlens_kv.back() : p.seqlen_kv;
    auto bshd = [](void* data, std::int64_t s, std::int64_t h, std::int64_t d) {
      gpu::DeviceTensor t;
      t.data = data;
      t.type = gpu::ElemType::f32;
      t.stride[0] = s * h * d, t.stride[1] = h * d, t.stride[2] = d, t.stride[3] = 1;
      return t;
    };
    gpu::Ref64Args a = gpu::ref64_args(p);
    const auto c = static_cast<std::size_t>(i);
    a.q = bshd(q_[c].data(), tq, p.heads_q, p.head_dim);
    a.k = bshd(k_[c].data(), tk, p.heads_kv, p.head_dim);
    a.v = bshd(v_[c].data(), tk, p.heads_kv, p.head_dim_v);
    a.out = bshd(out_.data(), tq, p.heads_q, p.head_dim_v);
    if (lse_.data()) {
      a.lse.data = lse_.data();
      a.lse.type = gpu::ElemType::f32;
      a.lse.stride[0] = p.heads_q * tq, a.lse.stride[1] = tq, a.lse.stride[2] = 1;
    }
    if (cu_.data()) {
      a.cu_q = cu_.as<std::int64_t>();
      a.cu_kv = cu_.as<std::int64_t>() + p.cu_seqlens_q.size();
    }
    gpu::attn_fwd_ref64(a, gpu::Ref64Path::automatic, nullptr);
  }
  void download(const Tensor& out) override {
    gpu::synchronize();
    if (out.shape() != out_shape_ || out.dtype() != DType::f32) throw Error("gpu.ref64 bench: download into another shape");
    out_.download(out.storage().data(), out_.bytes());
  }

 private:
  Problem p_;
  std::vector<gpu::DeviceBuffer> q_, k_, v_;
  gpu::DeviceBuffer out_, lse_, cu_;
  Shape out_shape_;
};

}  // namespace

/// Called by run_bench before the first case (a static registrar in a static library would be
/// dropped by the linker).
void register_bench_device_launchers() {
  static const bool once = [] {
    kernels::device_launchers()["gpu.ref64"] = [](const kernels::Args& a, int copies) {
      return std::unique_ptr<kernels::DeviceLaunch>(new Ref64Launch(a, copies));
    };
    return true;
  }();
  (void)once;
}

}  // namespace attest::conformance
