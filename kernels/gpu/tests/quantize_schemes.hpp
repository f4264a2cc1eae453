#pragma once
// The quantizer schemes both device-quantizer tests run, each key value of
// docs/quantizer-schemes.md at least once: test_quantize_math.cpp (the host/device arithmetic, on
// the CPU) and test_gpu_quantize.cpp (the device kernels).
#include <string>
#include <vector>

namespace attest::gpu::test {

inline const std::vector<std::string>& schemes() {
  static const std::vector<std::string> s{
      "bf16", "fp16", "bf16:overflow=sat_cuda", "fp16:round=away",
      "int8:per_tensor", "int8:per_tensor:scale=ieee_one", "int8:per_block=128:round=half:prescale=sm_log2e",
      "int8:per_block=64:round=half:smooth=bf16", "int8:per_block=64:smooth=fp32:scale=rcp",
      "int8:per_warp=sm89:scale=floor:apply=mul:prescale=sm_log2e", "int8:per_warp=sm90:role=k:scale=eps",
      "int8:per_thread=sm89:scale=eps:round=half:prescale=sm_log2e",
      "int8:per_thread=sm90:role=k:scale=eps:round=half:smooth=fp32", "int8:per_thread=sm90:scale=none",
      "int8:per_token", "int8:per_token:apply=mul:scale=rcp", "int8:per_channel",
      "fp8_e4m3fn:per_channel", "fp8_e4m3fn:per_channel:scale_max=2.25", "fp8_e5m2:per_token:round=away",
      "fp8_e4m3fnuz:per_channel:scale=rcp:scale_max=224:overflow=sat_hip:apply=div",
      "fp8_e5m2fnuz:per_block=64:overflow=ieee:apply=div", "fp8_e4m3fn:per_tensor:scale=floor",
      "fp8_e4m3fn:per_block=128:round=smaller:apply=div:scale=eps",
      "mxfp8_e4m3fn", "mxfp8_e4m3fn:scale=rceil", "mxfp8_e5m2:scale=ceil", "mxfp8_e4m3fn:scale=aiter_hip_fp8",
      "mxfp6_e2m3fn:scale=aiter_hip_fp6:prescale=sm_log2e:rotate=h128_bf16", "mxfp6_e3m2fn:round=away",
      "mxfp4_e2m1fn:scale=aiter_triton_rne:rotate=h32_bf16", "mxfp4_e2m1fn:scale=aiter_hip_fp4:round=smaller",
      "mxfp4_e2m1fn:scale=aiter_triton_v_fp4:overflow=ieee", "mxint8:scale=rceil", "mxint8:block=16:round=away",
      "mxfp8_e4m3fn:rotate=h128", "int8:per_block=32:rotate=h128:smooth=fp32",
  };
  return s;
}

}  // namespace attest::gpu::test
