#include <hip/hip_runtime.h>
__global__ void fp8(const float* x, int* o) { o[threadIdx.x] = __builtin_amdgcn_cvt_pk_fp8_f32(x[0], x[1], 0, false); }
__global__ void bf8(const float* x, int* o) { o[threadIdx.x] = __builtin_amdgcn_cvt_pk_bf8_f32(x[0], x[1], 0, false); }
#if defined(__gfx950__)
__global__ void fp4(const float* x, unsigned* o) { o[threadIdx.x] = __builtin_amdgcn_cvt_scalef32_pk_fp4_f32(0u, x[0], x[1], x[2], 0); }
__global__ void fp8s(const float* x, short* o) { typedef short v2s __attribute__((ext_vector_type(2))); v2s r = {0,0}; r = __builtin_amdgcn_cvt_scalef32_pk_fp8_f32(r, x[0], x[1], x[2], false); o[0]=r[0]; }
#endif
