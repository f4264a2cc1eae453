#pragma once
// Helpers shared by the check units.
#include <cmath>
#include <cstring>
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

/// Bitwise comparison of two float32 tensors of one shape: the count and the first mismatches
/// with indices. Empty string when equal, else a one-line description naming `what`.
inline std::string bit_diff(const Tensor& test, const Tensor& ref, const std::string& what, nlohmann::json& figures) {
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

/// Checks that need same bits across runs cannot judge a kernel that does not promise them.
inline bool needs_determinism(const Context& ctx, Outcome& out) {
  if (ctx.caps().deterministic) return false;
  out = unsupported("kernel " + ctx.kernel().name() + " declares no run-to-run determinism: bitwise parity does not apply");
  return true;
}

/// Logical (batch, token) position of query row i of batch element b (ragged: packed tokens).
inline std::pair<std::int64_t, std::int64_t> q_pos(const Problem& p, std::int64_t b, std::int64_t i) {
  return p.ragged() ? std::pair{std::int64_t{0}, p.cu_seqlens_q[static_cast<std::size_t>(b)] + i} : std::pair{b, i};
}
inline std::pair<std::int64_t, std::int64_t> kv_pos(const Problem& p, std::int64_t b, std::int64_t j) {
  return p.ragged() ? std::pair{std::int64_t{0}, p.cu_seqlens_kv[static_cast<std::size_t>(b)] + j} : std::pair{b, j};
}

}  // namespace attest::conformance::checks
