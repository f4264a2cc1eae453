#pragma once
// The CPU kernels read quantizer schemes as core's Scheme (attest/core/scheme.hpp: the one scheme
// type of reference/, kernels/ and the recipe; parse_scheme is its grammar, "f32" the identity).
// These are the CPU-side questions asked of a scheme; the arithmetic is cpu_quantize.cpp's own.
#include <cstdint>
#include <string>

#include "attest/core/scheme.hpp"

namespace attest::kernels::cpu {

/// MXINT8: MX family with int8 elements (no float element format).
inline bool is_mx_int8(const Scheme& s) { return s.family == Scheme::Family::mx && s.element == FormatId::int8; }
/// Sage warp geometry (docs/quantizer-schemes.md): rows per warp of per_warp / per_thread.
inline std::int64_t warp_rows(const Scheme& s) {
  const bool k = s.role == Scheme::Role::k;
  return s.arch == Scheme::SageArch::sm90 ? (k ? 128 : 16) : (k ? 64 : 32);
}
/// Empty when the CPU kernels implement the scheme, else why not.
std::string unsupported_reason(const Scheme& s);

}  // namespace attest::kernels::cpu
