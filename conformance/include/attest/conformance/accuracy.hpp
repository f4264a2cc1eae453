#pragma once
/// The accuracy judgement (the noise-floor rule of docs/gate.md) on given tensors, shared by the
/// gate's `accuracy` check and by `attest check --capture` so both give the same verdicts and
/// figures: trust checks first (reference norm 0, unexpected NaN/Inf, all-zero output are
/// MISTRUSTED), then `judge` with the tolerance row over out and, when `lse` is not empty, LSE.
#include "attest/conformance/tolerance.hpp"
#include "attest/conformance/verdict.hpp"
#include "attest/core/tensor.hpp"
#include "attest/reference/attention.hpp"
#include "attest/reference/emulate.hpp"

namespace attest::conformance {

/// `out` f32 [B,S,H,Dv] and `lse` f32 [B,H,S] (or empty) in the reference's logical shapes (any
/// strides); `emu` / `emu_rev` the recipe emulation and its floor twin (ref::floor_twin()).
Outcome judge_accuracy(const ToleranceRow& row, const Tensor& out, const Tensor& lse, const ref::AttentionOutput& ref64,
                       const ref::EmulatorOutput& emu, const ref::EmulatorOutput& emu_rev);

/// The output floor: how far the floor twin moves the emulation, measured before the output
/// rounding so that one output-ulp flip (already in the budget) is not counted twice.
metrics::Comparison output_floor(const ref::EmulatorOutput& emu, const ref::EmulatorOutput& twin);

}  // namespace attest::conformance
