#pragma once
/// Optional device entry points for benchmarking. A device kernel's Kernel::run takes host
/// tensors and copies them in and out, which is right for conformance but useless for timing.
/// A device kernel that registers a DeviceLaunch factory under its registry name lets
/// `attest bench` upload the inputs once and time launches alone with device events (and graph
/// replay). Header-only so that a kernel file registers itself without a new library:
///   ATTEST_REGISTER_DEVICE_LAUNCH("gpu.ref64", [](const Args& a, int copies) { ... });
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "attest/kernels/kernel.hpp"

namespace attest::kernels {

/// One forward pass prepared on device-resident buffers: `copies` copies of the inputs (for
/// rotation past the L2 cache), one output and LSE. Owns its device memory.
class DeviceLaunch {
 public:
  virtual ~DeviceLaunch() = default;
  /// Enqueues one forward pass on input copy `i` on the default stream: no host copies, no
  /// synchronization (the caller records events around it).
  virtual void launch(int i) = 0;
  /// Enqueues a replay of a graph captured once from launch(i); false when the kernel cannot be
  /// captured (then the benchmark reports eager timing only).
  virtual bool replay(int i) { (void)i; return false; }
  /// Copies the output of the last launch back into `out` (host, the Args layout): the bench
  /// checks that a timed kernel computed what its run() computes.
  virtual void download(const Tensor& out) = 0;
};

using DeviceLaunchFactory = std::function<std::unique_ptr<DeviceLaunch>(const Args& a, int copies)>;

/// kernel name -> factory.
inline std::map<std::string, DeviceLaunchFactory, std::less<>>& device_launchers() {
  static std::map<std::string, DeviceLaunchFactory, std::less<>> m;
  return m;
}
inline const DeviceLaunchFactory* find_device_launcher(std::string_view kernel) {
  auto& m = device_launchers();
  auto it = m.find(kernel);
  return it == m.end() ? nullptr : &it->second;
}
struct DeviceLaunchRegistrar {
  DeviceLaunchRegistrar(std::string name, DeviceLaunchFactory f) { device_launchers()[std::move(name)] = std::move(f); }
};

}  // namespace attest::kernels

#define ATTEST_REGISTER_DEVICE_LAUNCH(name, factory)                                                       \
  static const ::attest::kernels::DeviceLaunchRegistrar ATTEST_KERNELS_CAT(attest_device_launch_, __LINE__){ \
      name, factory}
