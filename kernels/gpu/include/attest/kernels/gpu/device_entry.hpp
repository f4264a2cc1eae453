#pragma once
/// Device entry points of registered GPU kernels, for the conformance checks that work on device
/// memory directly (graph capture and replay, device-side poison, canaries and allocator churn).
/// Kernel::run takes host tensors and copies them in and out, which cannot be captured into a
/// graph; a DeviceEntry enqueues one forward pass on a stream with device buffers, allocating
/// nothing and synchronising nothing, so the launches can be captured. Plain C++ (no device
/// headers). A GPU kernel registers one under its registry name:
///   ATTEST_REGISTER_DEVICE_ENTRY("gpu.ref64", std::make_unique<MyEntry>());
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "attest/core/problem.hpp"
#include "attest/core/recipe.hpp"

namespace attest::gpu {

/// Device buffers of one call, all float32 and contiguous: q [B,S,H,D], k [B,T,Hkv,D],
/// v [B,T,Hkv,Dv] (ragged: [1,total,...] with device cu_seqlens), out [B,S,H,Dv], lse [B,H,S]
/// (ragged [1,H,total_q]) or nullptr. Every out/lse element must be written.
struct DeviceIo {
  const float* q = nullptr;
  const float* k = nullptr;
  const float* v = nullptr;
  float* out = nullptr;
  float* lse = nullptr;
  const std::int64_t* cu_q = nullptr;   ///< device, batch + 1 entries (ragged only)
  const std::int64_t* cu_kv = nullptr;
  void* workspace = nullptr;            ///< workspace_bytes() of device scratch
};

class DeviceEntry {
 public:
  virtual ~DeviceEntry() = default;
  [[nodiscard]] virtual std::size_t workspace_bytes(const Problem& p, const Recipe& r) const {
    (void)p, (void)r;
    return 0;
  }
  /// Enqueues one forward pass on `stream` (a hipStream_t). Throws attest::Error on a problem the
  /// kernel refuses (callers ask Kernel::supports first).
  virtual void enqueue(const Problem& p, const Recipe& r, const DeviceIo& io, void* stream) const = 0;
};

/// kernel name -> entry.
inline std::map<std::string, std::unique_ptr<DeviceEntry>, std::less<>>& device_entries() {
  static std::map<std::string, std::unique_ptr<DeviceEntry>, std::less<>> m;
  return m;
}
inline const DeviceEntry* find_device_entry(std::string_view kernel) {
  auto& m = device_entries();
  auto it = m.find(kernel);
  return it == m.end() ? nullptr : it->second.get();
}
struct DeviceEntryRegistrar {
  DeviceEntryRegistrar(std::string name, std::unique_ptr<DeviceEntry> e) { device_entries()[std::move(name)] = std::move(e); }
};

}  // namespace attest::gpu

#define ATTEST_DEVICE_ENTRY_CAT2(a, b) a##b
#define ATTEST_DEVICE_ENTRY_CAT(a, b) ATTEST_DEVICE_ENTRY_CAT2(a, b)
#define ATTEST_REGISTER_DEVICE_ENTRY(name, entry)                                                        \
  static const ::attest::gpu::DeviceEntryRegistrar ATTEST_DEVICE_ENTRY_CAT(attest_device_entry_, __LINE__){ \
      name, entry}
