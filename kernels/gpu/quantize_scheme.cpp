// The device quantizers read schemes as core's Scheme (attest/core/scheme.hpp, shared with
// reference/ and kernels/cpu); the kernels take it by value (quantize_math.hpp).
#include <string>

#include "attest/core/scheme.hpp"
#include "attest/core/status.hpp"
#include "attest/kernels/gpu/quantize.hpp"

namespace attest::gpu {

void require_device_quantizer(const Scheme& s) {
  // Accepted by the grammar for recipes; there are no codes or scales to produce for it.
  if (s.family == Scheme::Family::identity)
    throw Error("scheme '" + scheme_head(s) + "': f32 is the identity operand of a recipe, not a quantizer");
}

}  // namespace attest::gpu
