// libFuzzer target: the .npy parser on arbitrary bytes. Built and run by scripts/fuzz
// (clang++-19 -fsanitize=fuzzer,address,undefined). A refusal (attest::Error) is the expected
// outcome for malformed input; any other exception, crash or sanitizer report is a finding.
#include <cstddef>
#include <cstdint>
#include <span>

#include "attest/core/status.hpp"
#include "attest/datasets/npy.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const attest::Tensor t = attest::datasets::decode_npy(std::as_bytes(std::span(data, size)), "fuzz.npy");
    // Touch what a caller would: the logical shape and a contiguous copy.
    if (t.numel() > 0) (void)t.contiguous();
  } catch (const attest::Error&) {
  }
  return 0;
}
