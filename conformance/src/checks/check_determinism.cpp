// determinism: N reruns of the same call give the same bits as the first (FlashAttention runs
// 250 reruns on a GPU; a CPU kernel's nondeterminism comes from threading, which a handful of
// reruns exposes).
#include "common.hpp"

namespace attest::conformance::checks {
namespace {

class Determinism final : public Check {
 public:
  bool declared_by(const kernels::Kernel& k) const override {
    return k.capabilities().deterministic;
  }
  std::string_view name() const override { return "determinism"; }
  std::string_view summary() const override { return "N reruns give the same bits"; }
  Outcome run(Context& ctx) const override {
    Outcome o;
    if (needs_determinism(ctx, o)) return o;
    const auto& base = ctx.baseline();
    nlohmann::json fig;
    fig["reruns"] = ctx.options().determinism_runs;
    for (int i = 0; i < ctx.options().determinism_runs; ++i) {
      const auto again = ctx.run(ctx.problem(), ctx.inputs());
      auto d = output_diff(again, base, fmt::format("rerun {}", i + 1), fig);
      if (!d.empty()) return failed(d, fig);
    }
    return passed(fig);
  }
};

}  // namespace
std::unique_ptr<Check> make_determinism() { return std::make_unique<Determinism>(); }
}  // namespace attest::conformance::checks
