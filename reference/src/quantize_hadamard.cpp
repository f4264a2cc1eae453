#include "attest/reference/hadamard.hpp"

#include <cstddef>
#include <string>

#include "attest/core/status.hpp"
#include "attest/reference/formats.hpp"

namespace attest::ref {

void fwht128(std::span<float, 128> x) {
  for (std::size_t h = 1; h < 128; h *= 2) {
    for (std::size_t base = 0; base < 128; base += 2 * h) {
      for (std::size_t i = base; i < base + h; ++i) {
        const float a = x[i];
        const float b = x[i + h];
        x[i] = a + b;
        x[i + h] = a - b;
      }
    }
  }
}

void hadamard128(std::span<float, 128> x) {
  fwht128(x);
  for (float& v : x) v = v * kHadamard128Norm;
}

void hadamard128_bf16(std::span<float, 128> x, float mult) {
  fwht128(x);
  for (float& v : x) {
    const float scaled = v * kHadamard128Norm;
    v = round_to(FormatId::bf16, scaled * mult);
  }
}

void hadamard32_bf16(std::span<float> x) {
  if (x.size() % 32 != 0)
    throw Error("hadamard32_bf16: " + std::to_string(x.size()) + " channels is not a multiple of 32");
  float in[32];
  for (std::size_t base = 0; base < x.size(); base += 32) {
    for (std::size_t j = 0; j < 32; ++j) in[j] = round_to(FormatId::bf16, x[base + j]);
    for (std::size_t k = 0; k < 32; ++k) {
      float acc = 0.0f;
      for (std::size_t j = 0; j < 32; ++j) {
        // Sylvester sign (-1)^popcount(j & k); the product of two bf16 values is exact in FP32.
        const bool neg = (__builtin_popcount(static_cast<unsigned>(j & k)) & 1) != 0;
        const float prod = in[j] * (neg ? -kHadamard32Bf16 : kHadamard32Bf16);
        acc = acc + prod;
      }
      x[base + k] = acc;
    }
  }
}

}  // namespace attest::ref
