// churn: the same call on buffers at other offsets and alignments (4, 12 and 68 bytes past the
// 64-byte boundary) gives the same bits.
#include "common.hpp"

namespace attest::conformance::checks {
namespace {

class Churn final : public Check {
 public:
  bool declared_by(const kernels::Kernel& k) const override {
    return k.capabilities().deterministic;
  }
  std::string_view name() const override { return "churn"; }
  std::string_view summary() const override { return "other buffer offsets/alignments give the same bits"; }
  Outcome run(Context& ctx) const override {
    Outcome o;
    if (needs_determinism(ctx, o)) return o;
    const auto& base = ctx.baseline();
    nlohmann::json fig;
    fig["offsets_elements"] = {1, 3, 17};
    for (const std::int64_t off : {1, 3, 17}) {
      RunSetup s;
      s.offset = off;
      s.slack = 2 * off + 1;
      auto d = output_diff(ctx.run(ctx.problem(), ctx.inputs(), s), base, fmt::format("offset {}", off), fig);
      if (!d.empty()) return failed(d, fig);
    }
    return passed(fig);
  }
};

}  // namespace
std::unique_ptr<Check> make_churn() { return std::make_unique<Churn>(); }
}  // namespace attest::conformance::checks
