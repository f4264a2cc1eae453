// churn: the same call on buffers at other offsets and alignments (4, 12 and 68 bytes past the
// 64-byte boundary) gives the same bits.
#include "common.hpp"

namespace attest::conformance::checks {

std::unique_ptr<Check> make_churn() {
  return make_parity_check("churn", "other buffer offsets/alignments give the same bits", [](Context& ctx, nlohmann::json& fig) {
    fig["offsets_elements"] = {1, 3, 17};
    for (const std::int64_t off : {1, 3, 17}) {
      RunSetup s;
      s.offset = off;
      s.slack = 2 * off + 1;
      if (auto d = rerun_diff(ctx, ctx.problem(), s, fmt::format("offset {}", off), fig); !d.empty()) return failed(d, fig);
    }
    return passed(fig);
  });
}

}  // namespace attest::conformance::checks
