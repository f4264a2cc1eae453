// Host-side device management behind attest/kernels/gpu/device.hpp.
#include "attest/kernels/gpu/device.hpp"

#include <utility>

#include "runtime.hpp"

namespace attest::gpu {

int device_count() {
  int n = 0;
  // No driver, no device, or a driver too old for the runtime: all mean "no usable GPU here".
  if (hipGetDeviceCount(&n) != hipSuccess) {
    (void)hipGetLastError();  // clear the sticky error so later calls start clean
    return 0;
  }
  return n;
}

DeviceInfo device_info(int device) {
  // Checked here rather than left to the runtime: a refused ordinal would be an API error that
  // compute-sanitizer reports and that lingers as the thread's last error.
  if (device < 0 || device >= device_count())
    throw Error("device " + std::to_string(device) + ": no such device (" + std::to_string(device_count()) + " present)");
  hipDeviceProp_t p{};
  ATTEST_GPU_CHECK(hipGetDeviceProperties(&p, device));
  DeviceInfo d;
  d.name = p.name;
  d.major = p.major;
  d.minor = p.minor;
  d.multiprocessors = p.multiProcessorCount;
  d.warp_size = p.warpSize;
  d.global_memory = p.totalGlobalMem;
#if defined(ATTEST_GPU_AMD)
  d.arch = p.gcnArchName;
#else
  d.arch = "sm_" + std::to_string(p.major) + std::to_string(p.minor);
#endif
  ATTEST_GPU_CHECK(hipRuntimeGetVersion(&d.runtime_version));
  ATTEST_GPU_CHECK(hipDriverGetVersion(&d.driver_version));
  return d;
}

const char* backend_name() {
#if defined(ATTEST_GPU_AMD)
  return "hip";
#else
  return "cuda";
#endif
}

void synchronize() { ATTEST_GPU_CHECK(hipDeviceSynchronize()); }

DeviceBuffer::DeviceBuffer(std::size_t bytes) : bytes_(bytes) {
  if (bytes > 0) ATTEST_GPU_CHECK(hipMalloc(&ptr_, bytes));
}

DeviceBuffer::~DeviceBuffer() {
  if (ptr_ != nullptr) (void)hipFree(ptr_);  // a destructor must not throw
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& o) noexcept
    : ptr_(std::exchange(o.ptr_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    if (ptr_ != nullptr) (void)hipFree(ptr_);
    ptr_ = std::exchange(o.ptr_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
  }
  return *this;
}

void DeviceBuffer::upload(const void* host, std::size_t bytes) {
  if (bytes > bytes_) throw Error("DeviceBuffer::upload: " + std::to_string(bytes) + " bytes into a buffer of " + std::to_string(bytes_));
  if (bytes > 0) ATTEST_GPU_CHECK(hipMemcpy(ptr_, host, bytes, hipMemcpyHostToDevice));
}

void DeviceBuffer::download(void* host, std::size_t bytes) const {
  if (bytes > bytes_) throw Error("DeviceBuffer::download: " + std::to_string(bytes) + " bytes from a buffer of " + std::to_string(bytes_));
  if (bytes > 0) ATTEST_GPU_CHECK(hipMemcpy(host, ptr_, bytes, hipMemcpyDeviceToHost));
}

void DeviceBuffer::fill_bytes(int value) {
  if (bytes_ > 0) ATTEST_GPU_CHECK(hipMemset(ptr_, value, bytes_));
}

EventTimer::EventTimer() {
  hipEvent_t a = nullptr, b = nullptr;
  ATTEST_GPU_CHECK(hipEventCreate(&a));
  ATTEST_GPU_CHECK(hipEventCreate(&b));
  start_ = a;
  stop_ = b;
}

EventTimer::~EventTimer() {
  (void)hipEventDestroy(static_cast<hipEvent_t>(start_));
  (void)hipEventDestroy(static_cast<hipEvent_t>(stop_));
}

void EventTimer::start() { ATTEST_GPU_CHECK(hipEventRecord(static_cast<hipEvent_t>(start_), nullptr)); }

double EventTimer::stop_ms() {
  ATTEST_GPU_CHECK(hipEventRecord(static_cast<hipEvent_t>(stop_), nullptr));
  ATTEST_GPU_CHECK(hipEventSynchronize(static_cast<hipEvent_t>(stop_)));
  float ms = 0;
  ATTEST_GPU_CHECK(hipEventElapsedTime(&ms, static_cast<hipEvent_t>(start_), static_cast<hipEvent_t>(stop_)));
  return ms;
}

}  // namespace attest::gpu
