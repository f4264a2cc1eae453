#pragma once
/// Host-side view of the GPU backend, in plain C++ (no device headers), so registry entries,
/// tests and benchmarks compiled by the host compiler can use it. Implemented in device.hip.
#include <cstddef>
#include <cstdint>
#include <string>

namespace attest::gpu {

/// Number of usable devices: 0 when there is no device or no driver (never throws), so tests
/// can GTEST_SKIP on machines without a GPU.
int device_count();

struct DeviceInfo {
  std::string name;
  std::string arch;  ///< "sm_90", "gfx942", ...
  int major = 0, minor = 0;
  int multiprocessors = 0;
  int warp_size = 0;  ///< 32 on NVIDIA and gfx1201, 64 on gfx942/gfx950
  std::size_t global_memory = 0;
  int runtime_version = 0, driver_version = 0;
};
/// Properties of device `device`; throws attest::Error when it does not exist.
DeviceInfo device_info(int device = 0);
/// "cuda" or "hip": the backend this library was built for.
const char* backend_name();

/// Waits for all work on the current device; throws attest::Error on an asynchronous fault.
void synchronize();

/// An owning device allocation (hipMalloc / hipFree). Move-only.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& o) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  [[nodiscard]] void* data() const { return ptr_; }
  template <class T>
  [[nodiscard]] T* as() const { return static_cast<T*>(ptr_); }
  [[nodiscard]] std::size_t bytes() const { return bytes_; }
  /// Copies `bytes` (<= size) from host to the start of the buffer / back (synchronous).
  void upload(const void* host, std::size_t bytes);
  void download(void* host, std::size_t bytes) const;
  /// Sets every byte to `value` (synchronous).
  void fill_bytes(int value);

 private:
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
};

/// Device timer: milliseconds between two events recorded around `fn` on the default stream.
class EventTimer {
 public:
  EventTimer();
  ~EventTimer();
  EventTimer(const EventTimer&) = delete;
  EventTimer& operator=(const EventTimer&) = delete;
  void start();
  /// Records the stop event, waits for it and returns the elapsed milliseconds.
  double stop_ms();

 private:
  void* start_ = nullptr;
  void* stop_ = nullptr;
};

}  // namespace attest::gpu
