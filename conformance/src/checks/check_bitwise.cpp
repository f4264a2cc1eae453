// bitwise: a kernel that declares a bitwise contract with its recipe equals the recipe emulator
// bit for bit (out, and lse when it writes one); the first mismatches are reported with indices.
#include "common.hpp"

namespace attest::conformance::checks {
namespace {

bool declared(const kernels::Kernel& k) { return k.capabilities().bitwise; }

Outcome against_emulator(const Check&, Context& ctx) {
  if (!ctx.caps().bitwise) return unsupported("kernel " + ctx.kernel().name() + " declares no bitwise contract");
  if (!ctx.recipe().bitwise_capable()) return unsupported("recipe uses hardware exp2: no bitwise model exists");
  std::string why;
  // Device oracles: bits against the emulator on the engine's planned blocks (every block when
  // the emulated work fits CheckOptions::device_sample_macs).
  if (auto d = device_verdict(ctx, "bitwise", ctx.inputs(), ctx.baseline(), why)) return std::move(*d);
  const auto& emu = ctx.emu();
  const auto& k = ctx.baseline();
  nlohmann::json fig = nlohmann::json::object();
  if (ctx.options().device_oracles) fig["oracles"] = "host", fig["oracles_why"] = why;
  const auto ce = metrics::compare(emu.out, emu.out, 0);
  if (ce.norm_ref == 0 && ce.nan_ref == 0) return mistrusted("emulator output is all zero: bitwise equality would prove nothing");
  auto d = bit_diff(k.out, emu.out, "out", fig);
  if (d.empty() && !k.lse.empty()) d = bit_diff(k.lse, emu.lse, "lse", fig);
  if (!d.empty()) return failed("differs from the recipe emulator: " + d, fig);
  fig["elements"] = k.out.numel();
  return passed(fig);
}

}  // namespace

std::unique_ptr<Check> make_bitwise() {
  return make_check("bitwise", "bits(kernel) == bits(recipe emulator), out and lse", against_emulator, declared);
}

}  // namespace attest::conformance::checks
