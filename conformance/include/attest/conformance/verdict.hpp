#pragma once
/// Verdicts and per-case results.
#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace attest::conformance {

/// passed: every bound held. failed: a bound or an invariant broke. error: the kernel or an
/// oracle threw where it must not. unsupported: the kernel refused with a reason, or the check
/// does not apply to its declared capabilities. invalid: the case cannot be built (inputs or a
/// problem variant). mistrusted: the measurement cannot be believed (degenerate output: all
/// zero, zero norm, unexpected NaN/Inf, or a fill that detects nothing, e.g. reference norm 0).
/// fault: the kernel faulted (kernels::KernelFault: a sticky device error, a crashed worker, a
/// hang past a timeout, out of memory); the case's context cannot be trusted afterwards, the gate
/// fails and goes on with the other cases. Appended last: journal records keep their names.
/// accepted: a failure of a check the kernel's declarations accept knowingly (a written-up
/// defect, Capabilities::accepted); it lets the gate pass and is reported with its reason.
enum class Verdict : std::uint8_t { passed, failed, error, unsupported, invalid, mistrusted, fault, accepted };

std::string_view verdict_name(Verdict v);  ///< "passed", "failed", ...
Verdict parse_verdict(std::string_view s);  ///< throws attest::Error listing valid names
/// Only passed and unsupported let a gate pass.
inline bool verdict_ok(Verdict v) { return v == Verdict::passed || v == Verdict::unsupported || v == Verdict::accepted; }

/// What one check concluded about one case.
struct Outcome {
  Verdict verdict = Verdict::passed;
  std::string reason;      ///< one line; empty for a plain pass
  nlohmann::json figures;  ///< measured values, bounds, floor, first mismatches ...
};

/// One finished case, as written to the JSONL journal.
struct Result {
  std::string descriptor;  ///< canonical case descriptor (with check)
  std::string kernel, recipe, problem, dist, check;
  std::uint64_t seed = 0;
  Outcome outcome;
  double seconds = 0;
};

/// A figure as JSON: finite numbers as numbers, NaN and +-Inf as "nan", "inf", "-inf" (JSON has none).
nlohmann::json json_number(double v);

nlohmann::json to_json(const Result& r);
/// Inverse of to_json (for --resume); throws attest::Error on a malformed record.
Result result_from_json(const nlohmann::json& j);

}  // namespace attest::conformance
