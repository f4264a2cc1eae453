// call_path: every tuning config / call path the kernel lists gives the bits of the default.
#include "common.hpp"

namespace attest::conformance::checks {
namespace {

class CallPath final : public Check {
 public:
  bool declared_by(const kernels::Kernel& k) const override {
    return k.capabilities().deterministic && k.configs().size() >= 2;
  }
  std::string_view name() const override { return "call_path"; }
  std::string_view summary() const override { return "each configs() entry gives the default's bits"; }
  Outcome run(Context& ctx) const override {
    Outcome o;
    if (needs_determinism(ctx, o)) return o;
    const auto configs = ctx.kernel().configs();
    if (configs.size() < 2) return unsupported("kernel " + ctx.kernel().name() + " has a single call path");
    const auto& base = ctx.baseline();
    nlohmann::json fig;
    fig["configs"] = configs;
    for (const auto& c : configs) {
      if (c.empty()) continue;
      RunSetup s;
      s.config = c;
      KernelOutput out;
      try {
        out = ctx.run(ctx.problem(), ctx.inputs(), s);
      } catch (const VerdictError& e) {
        // The kernel lists this call path and the default call worked: a path that throws (e.g. a
        // host sync inside a graph capture) is this check's failure, not an error of the harness.
        // Faults and call-time refusals keep their own verdicts.
        if (e.verdict != Verdict::error) throw;
        return failed("config '" + c + "' raised where the default call did not: " + std::string(e.what()), fig);
      }
      auto d = output_diff(out, base, "config '" + c + "'", fig);
      if (!d.empty()) return failed(d, fig);
    }
    return passed(fig);
  }
};

}  // namespace
std::unique_ptr<Check> make_call_path() { return std::make_unique<CallPath>(); }
}  // namespace attest::conformance::checks
