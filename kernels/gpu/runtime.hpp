#pragma once
/// Portability header for device code (HIP dialect). On AMD (hipcc or clang -x hip) it is
/// <hip/hip_runtime.h>; on NVIDIA (nvcc, `.hip` files compiled with LANGUAGE CUDA) it maps the
/// hip* subset attest uses onto the CUDA runtime, because Debian's HIP 5.2 NVIDIA headers do not
/// compile against CUDA 13. Anything not listed here is not part of the subset: add it here
/// (one line) before using it in a kernel file.
///
/// ATTEST_GPU_CHECK(call) checks every runtime call and ATTEST_GPU_CHECK_LAUNCH() every kernel
/// launch; both throw attest::Error("file:line: <call>: <runtime message>").
/// Warp size is a property of the target (64 on gfx942/gfx950, 32 on gfx1201 and NVIDIA): device
/// code reads `warpSize` (or kWarpSizeMax for array bounds) and never assumes 32.
#include <string>

#include "attest/core/status.hpp"

#if defined(__HIP_PLATFORM_AMD__) || (defined(__HIP__) && !defined(__CUDACC__))
#include <hip/hip_runtime.h>
#define ATTEST_GPU_AMD 1
#elif defined(__CUDACC__)
#include <cuda_runtime.h>
#define ATTEST_GPU_NVIDIA 1

// Types and constants.
using hipError_t = cudaError_t;
using hipStream_t = cudaStream_t;
using hipEvent_t = cudaEvent_t;
using hipGraph_t = cudaGraph_t;
using hipGraphExec_t = cudaGraphExec_t;
using hipGraphNode_t = cudaGraphNode_t;
using hipDeviceProp_t = cudaDeviceProp;
using hipMemcpyKind = cudaMemcpyKind;
using hipStreamCaptureMode = cudaStreamCaptureMode;
using hipGraphExecUpdateResult = cudaGraphExecUpdateResult;
inline constexpr hipError_t hipSuccess = cudaSuccess;
inline constexpr hipMemcpyKind hipMemcpyHostToDevice = cudaMemcpyHostToDevice;
inline constexpr hipMemcpyKind hipMemcpyDeviceToHost = cudaMemcpyDeviceToHost;
inline constexpr hipMemcpyKind hipMemcpyDeviceToDevice = cudaMemcpyDeviceToDevice;
inline constexpr hipMemcpyKind hipMemcpyDefault = cudaMemcpyDefault;
inline constexpr hipStreamCaptureMode hipStreamCaptureModeGlobal = cudaStreamCaptureModeGlobal;
inline constexpr hipStreamCaptureMode hipStreamCaptureModeThreadLocal = cudaStreamCaptureModeThreadLocal;
inline constexpr hipStreamCaptureMode hipStreamCaptureModeRelaxed = cudaStreamCaptureModeRelaxed;
inline constexpr unsigned hipStreamNonBlocking = cudaStreamNonBlocking;
inline constexpr hipError_t hipErrorNoDevice = cudaErrorNoDevice;
inline constexpr hipError_t hipErrorInsufficientDriver = cudaErrorInsufficientDriver;
inline constexpr hipError_t hipErrorNotReady = cudaErrorNotReady;
inline constexpr hipGraphExecUpdateResult hipGraphExecUpdateSuccess = cudaGraphExecUpdateSuccess;

// Functions: same signatures as HIP (which copied CUDA's), so plain forwarding.
inline hipError_t hipMalloc(void** p, size_t n) { return cudaMalloc(p, n); }
template <class T>
inline hipError_t hipMalloc(T** p, size_t n) { return cudaMalloc(reinterpret_cast<void**>(p), n); }
inline hipError_t hipFree(void* p) { return cudaFree(p); }
inline hipError_t hipMemcpy(void* d, const void* s, size_t n, hipMemcpyKind k) { return cudaMemcpy(d, s, n, k); }
inline hipError_t hipMemcpyAsync(void* d, const void* s, size_t n, hipMemcpyKind k, hipStream_t st = nullptr) {
  return cudaMemcpyAsync(d, s, n, k, st);
}
inline hipError_t hipMemset(void* p, int v, size_t n) { return cudaMemset(p, v, n); }
inline hipError_t hipMemsetAsync(void* p, int v, size_t n, hipStream_t st = nullptr) { return cudaMemsetAsync(p, v, n, st); }
inline hipError_t hipStreamCreate(hipStream_t* s) { return cudaStreamCreate(s); }
inline hipError_t hipStreamCreateWithFlags(hipStream_t* s, unsigned f) { return cudaStreamCreateWithFlags(s, f); }
inline hipError_t hipStreamDestroy(hipStream_t s) { return cudaStreamDestroy(s); }
inline hipError_t hipStreamSynchronize(hipStream_t s) { return cudaStreamSynchronize(s); }
inline hipError_t hipStreamQuery(hipStream_t s) { return cudaStreamQuery(s); }
inline hipError_t hipStreamBeginCapture(hipStream_t s, hipStreamCaptureMode m) { return cudaStreamBeginCapture(s, m); }
inline hipError_t hipStreamEndCapture(hipStream_t s, hipGraph_t* g) { return cudaStreamEndCapture(s, g); }
inline hipError_t hipEventCreate(hipEvent_t* e) { return cudaEventCreate(e); }
inline hipError_t hipEventDestroy(hipEvent_t e) { return cudaEventDestroy(e); }
inline hipError_t hipEventRecord(hipEvent_t e, hipStream_t s = nullptr) { return cudaEventRecord(e, s); }
inline hipError_t hipEventSynchronize(hipEvent_t e) { return cudaEventSynchronize(e); }
inline hipError_t hipEventElapsedTime(float* ms, hipEvent_t a, hipEvent_t b) { return cudaEventElapsedTime(ms, a, b); }
inline hipError_t hipGraphInstantiate(hipGraphExec_t* e, hipGraph_t g, void*, void*, size_t) {
  return cudaGraphInstantiate(e, g, 0ull);  // CUDA 12+: flags form; HIP keeps the legacy 5-argument form
}
inline hipError_t hipGraphLaunch(hipGraphExec_t e, hipStream_t s) { return cudaGraphLaunch(e, s); }
inline hipError_t hipGraphExecUpdate(hipGraphExec_t e, hipGraph_t g, hipGraphNode_t*, hipGraphExecUpdateResult* r) {
  cudaGraphExecUpdateResultInfo info{};
  const cudaError_t err = cudaGraphExecUpdate(e, g, &info);
  if (r != nullptr) *r = info.result;
  return err;
}
inline hipError_t hipGraphDestroy(hipGraph_t g) { return cudaGraphDestroy(g); }
inline hipError_t hipGraphGetNodes(hipGraph_t g, hipGraphNode_t* nodes, size_t* n) { return cudaGraphGetNodes(g, nodes, n); }
inline hipError_t hipGraphExecDestroy(hipGraphExec_t e) { return cudaGraphExecDestroy(e); }
inline hipError_t hipGetDeviceCount(int* n) { return cudaGetDeviceCount(n); }
inline hipError_t hipGetDevice(int* d) { return cudaGetDevice(d); }
inline hipError_t hipSetDevice(int d) { return cudaSetDevice(d); }
inline hipError_t hipGetDeviceProperties(hipDeviceProp_t* p, int d) { return cudaGetDeviceProperties(p, d); }
inline hipError_t hipDeviceSynchronize() { return cudaDeviceSynchronize(); }
inline hipError_t hipGetLastError() { return cudaGetLastError(); }
inline hipError_t hipPeekAtLastError() { return cudaPeekAtLastError(); }
inline const char* hipGetErrorString(hipError_t e) { return cudaGetErrorString(e); }
inline const char* hipGetErrorName(hipError_t e) { return cudaGetErrorName(e); }
inline hipError_t hipDriverGetVersion(int* v) { return cudaDriverGetVersion(v); }
inline hipError_t hipRuntimeGetVersion(int* v) { return cudaRuntimeGetVersion(v); }
template <class F>
inline hipError_t hipFuncSetAttributeMaxDynamicSharedMemorySize(F* f, int bytes) {
  return cudaFuncSetAttribute(f, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
}
// Launch: `kernel<<<grid, block, shared_bytes, stream>>>(args...)` is valid in both dialects;
// hipLaunchKernelGGL is kept for code written against HIP's macro.
#define hipLaunchKernelGGL(kernel, grid, block, shared, stream, ...) \
  kernel<<<(grid), (block), (shared), (stream)>>>(__VA_ARGS__)
#else
#error "attest/kernels/gpu/runtime.hpp is for device compilers (nvcc or clang -x hip) only"
#endif

#if defined(ATTEST_GPU_AMD)
template <class F>
inline hipError_t hipFuncSetAttributeMaxDynamicSharedMemorySize(F* f, int bytes) {
  return hipFuncSetAttribute(reinterpret_cast<const void*>(f), hipFuncAttributeMaxDynamicSharedMemorySize, bytes);
}
#endif

/// Largest warp size of any supported target (gfx942/gfx950 wavefronts): bound for per-warp
/// shared arrays. The actual size is `warpSize` at run time.
inline constexpr int kWarpSizeMax = 64;

namespace attest::gpu {

[[noreturn]] inline void throw_runtime_error(hipError_t err, const char* what, const char* file, int line) {
  // A failed runtime call is also recorded as the thread's last error; cleared here, or the next
  // launch check (hipGetLastError) would report this refused call as a failed launch.
  (void)hipGetLastError();
  throw Error(std::string(file) + ":" + std::to_string(line) + ": " + what + ": " + hipGetErrorName(err) + " (" +
              hipGetErrorString(err) + ")");
}

}  // namespace attest::gpu

/// Checks a hip* runtime call; throws attest::Error naming file:line, the call and the message.
#define ATTEST_GPU_CHECK(call)                                                                  \
  do {                                                                                          \
    const hipError_t attest_gpu_err_ = (call);                                                  \
    if (attest_gpu_err_ != hipSuccess) ::attest::gpu::throw_runtime_error(attest_gpu_err_, #call, __FILE__, __LINE__); \
  } while (0)

/// After every kernel launch: launch-configuration errors (and, in debug builds with
/// ATTEST_GPU_SYNC_CHECK, execution errors) become attest::Error.
#if defined(ATTEST_GPU_SYNC_CHECK)
#define ATTEST_GPU_CHECK_LAUNCH()               \
  do {                                          \
    ATTEST_GPU_CHECK(hipGetLastError());        \
    ATTEST_GPU_CHECK(hipDeviceSynchronize());   \
  } while (0)
#else
#define ATTEST_GPU_CHECK_LAUNCH() ATTEST_GPU_CHECK(hipGetLastError())
#endif
