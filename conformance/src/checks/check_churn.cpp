// churn: the same call on buffers at other offsets and alignments (4, 12 and 68 bytes past the
// 64-byte boundary) gives the same bits.
#include <algorithm>

#include "common.hpp"

namespace attest::conformance::checks {

std::unique_ptr<Check> make_churn() {
  return make_parity_check("churn", "other buffer offsets/alignments give the same bits", [](Context& ctx, nlohmann::json& fig) {
    // Offsets in units of the declared row_align: a kernel that needs aligned rows is not asked
    // to take unaligned starts (an unaligned start is outside its declaration).
    const std::int64_t a = std::max<std::int64_t>(1, ctx.caps().row_align);
    fig["offsets_elements"] = {a, 3 * a, 17 * a};
    for (const std::int64_t off : {a, 3 * a, 17 * a}) {
      RunSetup s;
      s.offset = off;
      s.slack = 2 * off + 1;
      if (auto d = rerun_diff(ctx, ctx.problem(), s, fmt::format("offset {}", off), fig); !d.empty()) return failed(d, fig);
    }
    return passed(fig);
  });
}

}  // namespace attest::conformance::checks
