// The named recipes: each a shorthand for one full recipe string (see recipe.hpp).
// Quantizer scheme strings follow docs/quantizer-schemes.md.
#include <array>

#include "attest/core/recipe.hpp"

namespace attest {

std::span<const NamedRecipe> named_recipes() {
  static constexpr std::array<NamedRecipe, 2> kNamed{{
      {"bf16", "q=bf16;k=bf16;v=bf16;p=bf16;out=bf16",
       "bf16 inputs, P rounded to bf16 before P.V (FlashAttention-2/3, cuDNN, PyTorch SDPA)"},
      {"fp16", "q=fp16;k=fp16;v=fp16;p=fp16;out=fp16",
       "fp16 inputs, P rounded to fp16 before P.V (FlashAttention-2/3, PyTorch SDPA)"},
  }};
  return kNamed;
}

}  // namespace attest
