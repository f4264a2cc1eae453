// Force-included by scripts/check-amd (-include) in place of the ROCm device library, which Debian
// 12 does not ship for gfx942/gfx950/gfx1201 (its rocm-device-libs 5.2 predates them). Without it,
// -nogpulib leaves threadIdx/blockIdx/blockDim/gridDim and __syncthreads' fences as external calls,
// and every kernel's register and spill counts are then the call ABI's, not the kernel's. These
// definitions do what ockl/hip.amdgcn.bc do, with compiler builtins, so the ISA report counts the
// kernel's own registers. ocml math (exp, log, ...) stays an external call: that is a real
// limitation of the check, named in docs/results/amd-isa/README.md.
#pragma once
// Clang 22 no longer predefines __AMDGCN_WAVEFRONT_SIZE, which HIP 5.2's warpSize is defined
// from. check-amd passes it per target (-D); a multi-target build (the hip preset) cannot, so the
// device pass takes the targets' default wave size here: 32 on RDNA (gfx10-12), 64 on CDNA/GCN.
#if defined(__AMDGCN__) && !defined(__AMDGCN_WAVEFRONT_SIZE)
#if defined(__GFX10__) || defined(__GFX11__) || defined(__GFX12__)
#define __AMDGCN_WAVEFRONT_SIZE 32
#else
#define __AMDGCN_WAVEFRONT_SIZE 64
#endif
#endif
#include <hip/hip_runtime.h>

extern "C" __device__ __attribute__((always_inline, const)) inline size_t __ockl_get_local_id(uint d) {
  return d == 0 ? __builtin_amdgcn_workitem_id_x() : d == 1 ? __builtin_amdgcn_workitem_id_y()
       : d == 2 ? __builtin_amdgcn_workitem_id_z() : 0;
}
extern "C" __device__ __attribute__((always_inline, const)) inline size_t __ockl_get_group_id(uint d) {
  return d == 0 ? __builtin_amdgcn_workgroup_id_x() : d == 1 ? __builtin_amdgcn_workgroup_id_y()
       : d == 2 ? __builtin_amdgcn_workgroup_id_z() : 0;
}
extern "C" __device__ __attribute__((always_inline, const)) inline size_t __ockl_get_local_size(uint d) {
  return d == 0 ? __builtin_amdgcn_workgroup_size_x() : d == 1 ? __builtin_amdgcn_workgroup_size_y()
       : d == 2 ? __builtin_amdgcn_workgroup_size_z() : 1;
}
extern "C" __device__ __attribute__((always_inline, const)) inline size_t __ockl_get_global_size(uint d) {
  return d == 0 ? __builtin_amdgcn_grid_size_x() : d == 1 ? __builtin_amdgcn_grid_size_y()
       : d == 2 ? __builtin_amdgcn_grid_size_z() : 1;
}
extern "C" __device__ __attribute__((always_inline, const)) inline size_t __ockl_get_num_groups(uint d) {
  const size_t g = __ockl_get_global_size(d), l = __ockl_get_local_size(d);
  return (g + l - 1) / l;
}
// The fence's arguments are constants at every call site (__syncthreads, __threadfence*), so after
// inlining only one branch remains; __builtin_amdgcn_fence needs literal arguments, hence the switch.
extern "C" __device__ __attribute__((always_inline)) inline void
__atomic_work_item_fence(__cl_mem_fence_flags, __memory_order o, __memory_scope s) {
#define ATTEST_SHIM_FENCE(order)                                                      \
  switch (s) {                                                                        \
    case __memory_scope_work_item: break;                                             \
    case __memory_scope_sub_group: __builtin_amdgcn_fence(order, "wavefront"); break; \
    case __memory_scope_work_group: __builtin_amdgcn_fence(order, "workgroup"); break;\
    case __memory_scope_device: __builtin_amdgcn_fence(order, "agent"); break;        \
    default: __builtin_amdgcn_fence(order, ""); break;                                \
  }
  switch (o) {
    case __memory_order_relaxed: break;
    case __memory_order_acquire: ATTEST_SHIM_FENCE(__ATOMIC_ACQUIRE) break;
    case __memory_order_release: ATTEST_SHIM_FENCE(__ATOMIC_RELEASE) break;
    case __memory_order_acq_rel: ATTEST_SHIM_FENCE(__ATOMIC_ACQ_REL) break;
    default: ATTEST_SHIM_FENCE(__ATOMIC_SEQ_CST) break;
  }
#undef ATTEST_SHIM_FENCE
}
