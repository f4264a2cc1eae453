// determinism: N reruns of the same call give the same bits as the first (FlashAttention runs
// 250 reruns on a GPU; a CPU kernel's nondeterminism comes from threading, which a handful of
// reruns exposes).
#include "common.hpp"

namespace attest::conformance::checks {

std::unique_ptr<Check> make_determinism() {
  return make_parity_check("determinism", "N reruns give the same bits", [](Context& ctx, nlohmann::json& fig) {
    fig["reruns"] = ctx.options().determinism_runs;
    for (int i = 0; i < ctx.options().determinism_runs; ++i)
      if (auto d = rerun_diff(ctx, ctx.problem(), {}, fmt::format("rerun {}", i + 1), fig); !d.empty()) return failed(d, fig);
    return passed(fig);
  });
}

}  // namespace attest::conformance::checks
