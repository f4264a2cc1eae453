#pragma once
// Helpers shared by the check units.
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "attest/conformance/check.hpp"
#include "attest/metrics/tensor_metrics.hpp"

namespace attest::conformance::checks {

inline Outcome passed(nlohmann::json figures = nlohmann::json::object(), std::string reason = {}) {
  return {Verdict::passed, std::move(reason), std::move(figures)};
}
inline Outcome failed(std::string reason, nlohmann::json figures = nlohmann::json::object()) {
  return {Verdict::failed, std::move(reason), std::move(figures)};
}
inline Outcome unsupported(std::string reason) { return {Verdict::unsupported, std::move(reason), nlohmann::json::object()}; }
inline Outcome mistrusted(std::string reason, nlohmann::json figures = nlohmann::json::object()) {
  return {Verdict::mistrusted, std::move(reason), std::move(figures)};
}

inline std::uint32_t bits_of(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

/// Whether two float32 tensors (rank <= 4, one shape, any strides) hold the same bits at every
/// logical element. The parity checks' common case, decided without metrics::compare's
/// per-element statistics (most of a long-sequence gate's host time); false also for what this
/// fast path does not read (other dtypes or ranks), where the full comparison decides.
inline bool same_bits(const Tensor& a, const Tensor& b) {
  if (a.dtype() != DType::f32 || b.dtype() != DType::f32 || a.shape() != b.shape() || a.rank() < 1 || a.rank() > 4)
    return false;
  std::int64_t n[4] = {1, 1, 1, 1}, sa[4] = {0, 0, 0, 0}, sb[4] = {0, 0, 0, 0};
  const int r = static_cast<int>(a.rank()), off = 4 - r;
  for (int i = 0; i < r; ++i) {
    n[off + i] = a.dim(i);
    sa[off + i] = a.strides()[static_cast<std::size_t>(i)];
    sb[off + i] = b.strides()[static_cast<std::size_t>(i)];
  }
  for (const auto x : n)
    if (x == 0) return true;
  const auto* pa = reinterpret_cast<const std::uint32_t*>(a.raw());
  const auto* pb = reinterpret_cast<const std::uint32_t*>(b.raw());
  for (std::int64_t i0 = 0; i0 < n[0]; ++i0)
    for (std::int64_t i1 = 0; i1 < n[1]; ++i1)
      for (std::int64_t i2 = 0; i2 < n[2]; ++i2) {
        const std::uint32_t* ra = pa + i0 * sa[0] + i1 * sa[1] + i2 * sa[2];
        const std::uint32_t* rb = pb + i0 * sb[0] + i1 * sb[1] + i2 * sb[2];
        if (sa[3] == 1 && sb[3] == 1) {
          if (std::memcmp(ra, rb, static_cast<std::size_t>(n[3]) * 4) != 0) return false;
        } else {
          for (std::int64_t i3 = 0; i3 < n[3]; ++i3)
            if (ra[i3 * sa[3]] != rb[i3 * sb[3]]) return false;
        }
      }
  return true;
}

/// Bitwise comparison of two float32 tensors of one shape: the count and the first mismatches
/// with indices. Empty string when equal, else a one-line description naming `what`.
inline std::string bit_diff(const Tensor& test, const Tensor& ref, const std::string& what, nlohmann::json& figures) {
  if (same_bits(test, ref)) return {};  // what metrics::compare would find (0 mismatches), sooner
  const auto c = metrics::compare(test, ref, 8);
  if (c.bit_mismatches == 0) return {};
  nlohmann::json j;
  metrics::to_json(j, c);
  figures[what] = j;
  if (c.first_mismatches.empty()) return fmt::format("{}: {} elements differ", what, c.bit_mismatches);
  const auto& m = c.first_mismatches.front();
  return fmt::format("{}: {} of {} elements differ bitwise; first at {}: {:.9g} (0x{:08x}) vs {:.9g} (0x{:08x})", what,
                     c.bit_mismatches, c.count, metrics::index_string(m.index), m.test,
                     static_cast<std::uint32_t>(m.test_bits), m.ref, static_cast<std::uint32_t>(m.ref_bits));
}

/// Bit comparison of out and (when both have one) lse; empty when identical.
inline std::string output_diff(const KernelOutput& test, const KernelOutput& ref, const std::string& what,
                               nlohmann::json& figures) {
  auto d = bit_diff(test.out, ref.out, what + " out", figures);
  if (!d.empty()) return d;
  if (!test.lse.empty() && !ref.lse.empty()) return bit_diff(test.lse, ref.lse, what + " lse", figures);
  return {};
}

/// The device engine's verdict of `check` (accuracy or bitwise) on the kernel output `k` of
/// inputs `in` (CheckOptions::device_oracles; engine::judge_on_device, check_accuracy.cpp), or
/// nullopt: not asked, an LSE to judge (the engine judges out only), or a case the engine does not
/// take -- then `why` says which and the caller judges on the host as without the option.
/// `flush_below`: engine::JudgeRequest's (the subnormal check of a kernel that declares ftz).
std::optional<Outcome> device_verdict(const Context& ctx, const std::string& check, const datasets::Qkv& in,
                                      const KernelOutput& k, std::string& why, double flush_below = 0);
/// Records on a host verdict why the device engine did not judge it (device_oracles only).
inline Outcome host_judged(const Context& ctx, Outcome o, const std::string& why) {
  if (ctx.options().device_oracles) {
    if (!o.figures.is_object()) o.figures = nlohmann::json::object();
    o.figures["oracles"] = "host";
    o.figures["oracles_why"] = why;
  }
  return o;
}

/// Checks that need same bits across runs cannot judge a kernel that does not promise them.
inline bool needs_determinism(const Context& ctx, Outcome& out) {
  if (ctx.caps().deterministic) return false;
  out = unsupported("kernel " + ctx.kernel().name() + " declares no run-to-run determinism: bitwise parity does not apply");
  return true;
}

/// Kernels that promise the same bits across runs declare the bit-parity checks.
inline bool declares_determinism(const kernels::Kernel& k) { return k.capabilities().deterministic; }

/// The case's call rerun on `p` with `setup`, compared bit for bit with the baseline (out, and
/// lse when both write one): empty when identical, else the first difference named `what`.
inline std::string rerun_diff(Context& ctx, const Problem& p, const RunSetup& setup, const std::string& what,
                              nlohmann::json& figures) {
  const auto& base = ctx.baseline();
  return output_diff(ctx.run(p, ctx.inputs(), setup), base, what, figures);
}

/// A check given by its name, one-line summary, run function and declaration predicate (none:
/// Check's default), so that a check unit is its logic and not a class skeleton. `run` gets the
/// check itself for its name (the key of its tolerance row).
class FnCheck final : public Check {
 public:
  using RunFn = std::function<Outcome(const Check& self, Context& ctx)>;
  using DeclaredFn = bool (*)(const kernels::Kernel& k);
  FnCheck(std::string_view name, std::string_view summary, RunFn run, DeclaredFn declared)
      : name_(name), summary_(summary), run_(std::move(run)), declared_(declared) {}
  std::string_view name() const override { return name_; }
  std::string_view summary() const override { return summary_; }
  bool declared_by(const kernels::Kernel& k) const override { return declared_ ? declared_(k) : Check::declared_by(k); }
  Outcome run(Context& ctx) const override { return run_(*this, ctx); }

 private:
  std::string name_, summary_;  // owned: a caller may build them
  RunFn run_;
  DeclaredFn declared_;
};

inline std::unique_ptr<Check> make_check(std::string_view name, std::string_view summary, FnCheck::RunFn run,
                                         FnCheck::DeclaredFn declared = nullptr) {
  return std::make_unique<FnCheck>(name, summary, std::move(run), declared);
}

/// A bit-parity check (determinism, churn, layout: the baseline's call made again another way
/// gives the same bits): unsupported for a kernel without run-to-run determinism, else `body`
/// on empty figures.
inline std::unique_ptr<Check> make_parity_check(std::string_view name, std::string_view summary,
                                                Outcome (*body)(Context& ctx, nlohmann::json& figures),
                                                FnCheck::DeclaredFn declared = declares_determinism) {
  return make_check(
      name, summary,
      [body](const Check&, Context& ctx) {
        Outcome o;
        if (needs_determinism(ctx, o)) return o;
        nlohmann::json fig;
        return body(ctx, fig);
      },
      declared);
}

/// Logical (batch, token) position of query row i of batch element b (ragged: packed tokens).
inline std::pair<std::int64_t, std::int64_t> q_pos(const Problem& p, std::int64_t b, std::int64_t i) {
  return p.ragged() ? std::pair{std::int64_t{0}, p.cu_seqlens_q[static_cast<std::size_t>(b)] + i} : std::pair{b, i};
}
inline std::pair<std::int64_t, std::int64_t> kv_pos(const Problem& p, std::int64_t b, std::int64_t j) {
  return p.ragged() ? std::pair{std::int64_t{0}, p.cu_seqlens_kv[static_cast<std::size_t>(b)] + j} : std::pair{b, j};
}

}  // namespace attest::conformance::checks
