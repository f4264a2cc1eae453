// libFuzzer target: the safetensors parser on arbitrary bytes. Built and run by scripts/fuzz
// (clang++-19 -fsanitize=fuzzer,address,undefined). A refusal (attest::Error) is the expected
// outcome for malformed input; any other exception, crash or sanitizer report is a finding.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "attest/core/status.hpp"
#include "attest/datasets/safetensors.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string again;
  try {
    const auto st = attest::datasets::decode_safetensors(std::as_bytes(std::span(data, size)), "fuzz.safetensors");
    again = attest::datasets::encode_safetensors(st.tensors, st.metadata);
  } catch (const attest::Error&) {
    return 0;  // refused (an empty tensor name is readable but not writable: also refused here)
  }
  // What was accepted writes back to bytes that must read again: an Error here escapes and
  // libFuzzer reports it.
  (void)attest::datasets::decode_safetensors(std::as_bytes(std::span(again.data(), again.size())), "again");
  return 0;
}
