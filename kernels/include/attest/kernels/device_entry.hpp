#pragma once
/// The device side of a GPU kernel (Kernel::device()): one forward pass enqueued on a stream with
/// device buffers, allocating nothing and synchronising nothing, so its launches can be captured
/// into a graph and timed alone. Kernel::run takes host tensors and copies them in and out, which
/// is right for the host-tensor checks but can be neither captured nor timed as the kernel. The
/// device checks (graph_*, device_*) and `attest bench` drive this. Plain C++: no device headers.
#include <cstddef>
#include <cstdint>

#include "attest/core/problem.hpp"
#include "attest/core/recipe.hpp"

namespace attest::kernels {

/// Device buffers of one call, all float32 and contiguous: q [B,S,H,D], k [B,T,Hkv,D],
/// v [B,T,Hkv,Dv] (ragged: [1,total,...] with device cu_seqlens), out [B,S,H,Dv], lse [B,H,S]
/// (ragged [1,H,total_q]) or nullptr. Every out/lse element must be written.
struct DeviceIo {
  const float* q = nullptr;
  const float* k = nullptr;
  const float* v = nullptr;
  float* out = nullptr;
  float* lse = nullptr;
  const std::int64_t* cu_q = nullptr;  ///< device, batch + 1 entries (ragged only)
  const std::int64_t* cu_kv = nullptr;
  void* workspace = nullptr;  ///< workspace_bytes() of device scratch
};

class DeviceEntry {
 public:
  virtual ~DeviceEntry() = default;
  /// Device scratch one call needs (allocated by the caller, before any capture).
  [[nodiscard]] virtual std::size_t workspace_bytes(const Problem& p, const Recipe& r) const {
    (void)p, (void)r;
    return 0;
  }
  /// Enqueues one forward pass on `stream` (a hipStream_t / cudaStream_t; nullptr = the legacy
  /// default stream). Throws attest::Error on a problem the kernel refuses (callers ask
  /// Kernel::supports first).
  virtual void enqueue(const Problem& p, const Recipe& r, const DeviceIo& io, void* stream) const = 0;
};

}  // namespace attest::kernels
