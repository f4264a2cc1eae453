#pragma once
// Helpers of the device checks (check_graph.cpp, check_device_memory.cpp): one forward pass of a
// GPU kernel's device side (Kernel::device(), kernels/include/attest/kernels/device_entry.hpp)
// preceded by the device quantizer of Q, on device buffers this file owns, so a check can
// capture it into a graph, replay it, move its buffers and look at every byte around them.
// Only in GPU builds (ATTEST_GPU_BACKEND); CPU builds report the device checks unsupported.
#include "common.hpp"

#if defined(ATTEST_GPU_BACKEND)
#include <cstring>
#include <vector>

#include "attest/kernels/device_entry.hpp"
#include "attest/kernels/gpu/device.hpp"
#include "attest/kernels/gpu/graph.hpp"
#include "attest/kernels/gpu/quantize.hpp"
#endif

namespace attest::conformance::checks {

#if !defined(ATTEST_GPU_BACKEND)
inline bool device_check_declared(const kernels::Kernel&) { return false; }
/// CPU builds: the device checks do not apply.
inline bool device_check_applies(const Context&, Outcome& out) {
  out = unsupported("built without a GPU backend (ATTEST_GPU=none): device checks do not apply");
  return false;
}
#else

/// A kernel declares the device checks by having a device side (on a host with a device).
inline bool device_check_declared(const kernels::Kernel& k) { return k.device() != nullptr && gpu::device_count() > 0; }

/// A device check applies to kernels with a device side, on a host with a device.
inline bool device_check_applies(const Context& ctx, Outcome& out) {
  if (ctx.kernel().device() == nullptr) {
    out = unsupported("kernel " + ctx.kernel().name() +
                      " has no device side (device checks apply to GPU kernels with one, Kernel::device())");
    return false;
  }
  if (gpu::device_count() == 0) {
    out = unsupported("no GPU device or driver on this host");
    return false;
  }
  return true;
}

/// Bytes of every output of one call, downloaded.
struct DeviceResult {
  std::vector<std::uint8_t> out, lse, codes, scales;
};

/// Empty when a == b byte for byte, else one line naming the first difference.
inline std::string device_diff(const DeviceResult& a, const DeviceResult& b, const std::string& what) {
  const std::pair<const char*, const std::vector<std::uint8_t>*> parts[] = {
      {"out", &a.out}, {"lse", &a.lse}, {"Q codes", &a.codes}, {"Q scales", &a.scales}};
  const std::vector<std::uint8_t>* other[] = {&b.out, &b.lse, &b.codes, &b.scales};
  for (int i = 0; i < 4; ++i) {
    const auto& x = *parts[i].second;
    const auto& y = *other[i];
    if (x.size() != y.size()) return fmt::format("{} {}: {} vs {} bytes", what, parts[i].first, x.size(), y.size());
    std::size_t n = 0, first = 0;
    for (std::size_t j = 0; j < x.size(); ++j)
      if (x[j] != y[j] && n++ == 0) first = j;
    if (n > 0) {
      const bool f32 = i < 2;
      const std::size_t e = f32 ? first / 4 : first;
      std::uint32_t vx = 0, vy = 0;
      if (f32) {
        std::memcpy(&vx, x.data() + 4 * e, 4);
        std::memcpy(&vy, y.data() + 4 * e, 4);
      } else {
        vx = x[e], vy = y[e];
      }
      return fmt::format("{} {}: {} of {} bytes differ; first at element {}: 0x{:x} vs 0x{:x}", what, parts[i].first, n,
                         x.size(), e, vx, vy);
    }
  }
  return {};
}

/// Device buffers of one call: each tensor in its own allocation with `guard` bytes before and
/// after and its data `offset` bytes further in (allocator churn).
class DeviceCall {
 public:
  struct Buf {
    gpu::DeviceBuffer mem;
    std::size_t bytes = 0, lead = 0;  // data bytes; bytes before the data
    [[nodiscard]] void* ptr() const { return mem.as<std::uint8_t>() + lead; }
  };

  DeviceCall(const Context& ctx, std::size_t guard = 0, std::size_t offset = 0)
      : p_(ctx.problem()), r_(ctx.recipe()), entry_(ctx.kernel().device()), guard_(guard) {
    const bool rg = p_.ragged();
    const std::int64_t bq = rg ? 1 : p_.batch;
    tq_ = rg ? p_.cu_seqlens_q.back() : p_.seqlen_q;
    const std::int64_t tk = rg ? p_.cu_seqlens_kv.back() : p_.seqlen_kv;
    // The quantizer node: the recipe's Q scheme when the device quantizers implement it for
    // this shape, else a bf16 cast (f32 recipes such as gpu.ref64's have no Q quantizer).
    qs_ = parse_scheme("bf16");
    try {
      const Scheme& s = r_.q;
      gpu::require_device_quantizer(s);
      const bool h128 = s.rotate == Scheme::Rotation::h128 || s.rotate == Scheme::Rotation::h128_bf16;
      if (!(h128 && p_.head_dim != 128) && !(s.rotate == Scheme::Rotation::h32_bf16 && p_.head_dim % 32 != 0)) qs_ = s;
    } catch (const Error&) {
    }
    qa_.lead0 = bq, qa_.lead1 = p_.heads_q, qa_.T = tq_, qa_.C = p_.head_dim;
    qa_.stride[0] = tq_ * p_.heads_q * p_.head_dim, qa_.stride[1] = p_.head_dim, qa_.stride[2] = p_.heads_q * p_.head_dim,
    qa_.stride[3] = 1;
    qa_.sm_scale = p_.scale();
    const auto f4 = [](std::int64_t n) { return static_cast<std::size_t>(n) * 4; };
    const std::int64_t slabs = bq * p_.heads_q;
    alloc(q_, f4(bq * tq_ * p_.heads_q * p_.head_dim), offset);
    alloc(k_, f4(bq * tk * p_.heads_kv * p_.head_dim), offset);
    alloc(v_, f4(bq * tk * p_.heads_kv * p_.head_dim_v), offset);
    alloc(out_, f4(bq * tq_ * p_.heads_q * p_.head_dim_v), offset);
    if (ctx.caps().lse) alloc(lse_, f4(bq * p_.heads_q * tq_), offset);
    alloc(codes_, gpu::quantize_codes_bytes(qs_, slabs * tq_ * p_.head_dim), offset);
    alloc(scales_, gpu::quantize_scales_bytes(qs_, slabs, tq_, p_.head_dim), offset);
    alloc(qws_, gpu::quantize_workspace_bytes(qs_, slabs, tq_, p_.head_dim), 0);
    alloc(ws_, entry_->workspace_bytes(p_, r_), 0);
    if (rg) {
      std::vector<std::int64_t> host(p_.cu_seqlens_q);
      host.insert(host.end(), p_.cu_seqlens_kv.begin(), p_.cu_seqlens_kv.end());
      alloc(cu_, host.size() * 8, 0);
      // Into the data region (after the guard zone), where enqueue() points the kernel.
      std::vector<std::uint8_t> whole(cu_.mem.bytes(), 0);
      std::memcpy(whole.data() + cu_.lead, host.data(), cu_.bytes);
      cu_.mem.upload(whole.data(), whole.size());
    }
    gpu::synchronize();
  }
  /// The same, then every byte set to `pattern` (fill_all) and `inputs` uploaded: the set-up
  /// every device check starts from.
  DeviceCall(const Context& ctx, std::uint32_t pattern, const datasets::Qkv& inputs, std::size_t guard = 0,
             std::size_t offset = 0)
      : DeviceCall(ctx, guard, offset) {
    fill_all(pattern);
    upload(inputs);
  }

  [[nodiscard]] const Scheme& q_scheme() const { return qs_; }

  // Host-to-device copies may return before their DMA lands, and the checks' streams are
  // non-blocking (not ordered after the legacy stream): every setup ends with a device-wide
  // synchronisation so no launch can race with it.
  /// Every byte of every allocation (guards included) set to the 32-bit pattern.
  void fill_all(std::uint32_t pattern) {
    for (Buf* b : {&q_, &k_, &v_, &out_, &lse_, &codes_, &scales_}) fill(*b, pattern);
    gpu::synchronize();
  }
  /// Output allocations (guards included) set to the pattern.
  void fill_outputs(std::uint32_t pattern) {
    for (Buf* b : {&out_, &lse_, &codes_, &scales_}) fill(*b, pattern);
    gpu::synchronize();
  }
  void upload(const datasets::Qkv& in) {
    copy_in(q_, in.q);
    copy_in(k_, in.k);
    copy_in(v_, in.v);
    gpu::synchronize();
  }

  /// Enqueues quantizer + attention on `stream` (capturable: no allocation, no synchronisation).
  void enqueue(void* stream) const {
    gpu::QuantizeArgs a = qa_;
    a.x = static_cast<const float*>(q_.ptr());
    a.codes = codes_.ptr();
    a.scales = scales_.ptr();
    a.workspace = qws_.bytes > 0 ? qws_.ptr() : nullptr;
    gpu::quantize_device(qs_, a, stream);
    kernels::DeviceIo io;
    io.q = static_cast<const float*>(q_.ptr());
    io.k = static_cast<const float*>(k_.ptr());
    io.v = static_cast<const float*>(v_.ptr());
    io.out = static_cast<float*>(out_.ptr());
    io.lse = lse_.bytes > 0 ? static_cast<float*>(lse_.ptr()) : nullptr;
    if (cu_.bytes > 0) {
      io.cu_q = static_cast<const std::int64_t*>(cu_.ptr());
      io.cu_kv = io.cu_q + p_.cu_seqlens_q.size();
    }
    io.workspace = ws_.bytes > 0 ? ws_.ptr() : nullptr;
    entry_->enqueue(p_, r_, io, stream);
  }

  [[nodiscard]] DeviceResult download() const {
    DeviceResult r;
    r.out = data_of(out_);
    r.lse = data_of(lse_);
    r.codes = data_of(codes_);
    r.scales = data_of(scales_);
    return r;
  }
  /// Whole allocations (guards included) of inputs and outputs, in a fixed order.
  [[nodiscard]] std::vector<std::pair<std::string, std::vector<std::uint8_t>>> whole() const {
    std::vector<std::pair<std::string, std::vector<std::uint8_t>>> w;
    const std::pair<const char*, const Buf*> all[] = {{"q", &q_}, {"k", &k_}, {"v", &v_}, {"out", &out_},
                                                     {"lse", &lse_}, {"Q codes", &codes_}, {"Q scales", &scales_}};
    for (const auto& [n, b] : all) {
      std::vector<std::uint8_t> bytes(b->mem.bytes());
      b->mem.download(bytes.data(), bytes.size());
      w.emplace_back(n, std::move(bytes));
    }
    return w;
  }
  [[nodiscard]] std::size_t guard() const { return guard_; }
  [[nodiscard]] std::size_t lead_of(const std::string& name) const {
    return name == "q" ? q_.lead : name == "k" ? k_.lead : name == "v" ? v_.lead : name == "out" ? out_.lead
         : name == "lse" ? lse_.lead : name == "Q codes" ? codes_.lead : scales_.lead;
  }
  [[nodiscard]] std::size_t bytes_of(const std::string& name) const {
    return name == "q" ? q_.bytes : name == "k" ? k_.bytes : name == "v" ? v_.bytes : name == "out" ? out_.bytes
         : name == "lse" ? lse_.bytes : name == "Q codes" ? codes_.bytes : scales_.bytes;
  }

 private:
  void alloc(Buf& b, std::size_t bytes, std::size_t offset) {
    if (bytes == 0) return;
    b.bytes = bytes;
    b.lead = guard_ + offset;
    b.mem = gpu::DeviceBuffer(b.lead + bytes + guard_);
  }
  static void fill(Buf& b, std::uint32_t pattern) {
    if (b.mem.bytes() == 0) return;
    std::vector<std::uint32_t> host((b.mem.bytes() + 3) / 4, pattern);
    b.mem.upload(host.data(), b.mem.bytes());
  }
  static void copy_in(Buf& b, const Tensor& t) {
    const Tensor c = t.contiguous();
    if (static_cast<std::size_t>(c.numel()) * 4 != b.bytes) throw Error("device check: input size mismatch");
    std::vector<std::uint8_t> whole(b.mem.bytes());
    b.mem.download(whole.data(), whole.size());
    if (b.bytes > 0) std::memcpy(whole.data() + b.lead, c.data<float>(), b.bytes);
    b.mem.upload(whole.data(), whole.size());
  }
  static std::vector<std::uint8_t> data_of(const Buf& b) {
    std::vector<std::uint8_t> all(b.mem.bytes());
    if (!all.empty()) b.mem.download(all.data(), all.size());
    return {all.begin() + static_cast<std::ptrdiff_t>(b.lead), all.begin() + static_cast<std::ptrdiff_t>(b.lead + b.bytes)};
  }

  Problem p_;
  Recipe r_;
  const kernels::DeviceEntry* entry_;
  std::size_t guard_;
  std::int64_t tq_ = 0;
  Scheme qs_;
  gpu::QuantizeArgs qa_;
  Buf q_, k_, v_, out_, lse_, codes_, scales_, qws_, ws_, cu_;
};

/// Eager call on a fresh stream; waits and downloads.
inline DeviceResult run_eager(const DeviceCall& call, const gpu::Stream& s) {
  call.enqueue(s.get());
  s.synchronize();
  return call.download();
}

/// Another input set of the case's problem and distribution (seed + 1000): what "new inputs"
/// means for the graph checks.
inline datasets::Qkv other_inputs(const Context& ctx) {
  try {
    return datasets::generate_qkv(ctx.problem(), ctx.the_case().dist, ctx.the_case().seed + 1000);
  } catch (const std::exception& e) {
    throw VerdictError(Verdict::invalid, std::string("inputs: ") + e.what());
  }
}

#endif  // ATTEST_GPU_BACKEND

/// Base of the device checks: declared by kernels with a device side (on a host with a device);
/// unsupported for other kernels and in CPU builds; else run_device(), with a runtime or capture
/// error turned into a failed verdict naming the check.
class DeviceCheck : public Check {
 public:
  bool declared_by(const kernels::Kernel& k) const final { return device_check_declared(k); }
  Outcome run(Context& ctx) const final {
    Outcome o;
    if (!device_check_applies(ctx, o)) return o;
#if defined(ATTEST_GPU_BACKEND)
    try {
      return run_device(ctx);
    } catch (const VerdictError&) {
      throw;
    } catch (const Error& e) {
      return failed(std::string(name()) + ": " + e.what());
    }
#endif
    return o;
  }

#if defined(ATTEST_GPU_BACKEND)
 protected:
  virtual Outcome run_device(Context& ctx) const = 0;
#endif
};

}  // namespace attest::conformance::checks
