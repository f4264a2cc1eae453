#pragma once
/// Tolerances are data: conformance/tolerances.json, an ordered list of rows keyed by recipe glob
/// and check glob (first match wins), each with its bounds and the reason for its numbers. One
/// generic comparator (`judge`) reads a row; no kernel name ever appears in code or table.
///
/// The noise-floor rule (DESIGN.md): for every bounded metric m,
///   measured_m <= alpha_m * budget_m + beta_m * floor_m + eps_m
/// with measured = metric(K, ref64), budget = metric(emu, ref64), floor = metric(emu_rev, emu).
/// Row format (JSON):
///   {"recipe": "bf16*", "check": "accuracy", "alpha": 2, "beta": 2,
///    "eps": {"max_abs": 1e-6, "rel_l2": 1e-7, "lse_max_abs": 1e-6},
///    "cosine_min": 0.999, "rel_l1_max": 0.05,
///    "bad_fraction": {"atol": 0.3, "rtol": 0.25, "max": 0.005},
///    "nan_policy": "rows", "reason": "why these numbers"}
/// The metrics bounded are the keys of "eps"; "alpha"/"beta" are a number for all of them or an
/// object per metric. Metric names: max_abs, mean_abs, rel_l1, rel_l2, rmse, lse_max_abs,
/// lse_mean_abs.
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "attest/core/tensor.hpp"
#include "attest/metrics/tensor_metrics.hpp"

namespace attest::conformance {

struct Bound {
  double alpha = 0, beta = 0, eps = 0;
};

/// Sage-style element test: an element is bad when |t - r| > atol and |t - r| > rtol * |r|;
/// the case fails when more than `max` of the elements are bad.
struct BadFraction {
  double atol = 0, rtol = 0, max = 0;
};

/// How NaN spreads (check nonfinite): `rows` — only the rows that see the NaN in exact
/// arithmetic; `emulator` — exactly the rows the recipe emulator poisons (a recipe whose
/// quantization scale spans a block or a tensor spreads a NaN by design).
enum class NanPolicy : std::uint8_t { rows, emulator };

struct ToleranceRow {
  std::string recipe;  ///< glob over recipe labels (named recipe or full string)
  std::string check;   ///< glob over check names
  std::map<std::string, Bound> bounds;
  std::optional<double> cosine_min;
  std::optional<double> rel_l1_max;
  std::optional<BadFraction> bad_fraction;
  NanPolicy nan_policy = NanPolicy::rows;
  std::string reason;
  int index = 0;  ///< position in the table (0-based), quoted in verdicts
};

/// Named metric values, e.g. {"max_abs": 1e-3, "rel_l2": 2e-3, "lse_max_abs": 1e-6}.
using MetricSet = std::map<std::string, double>;

/// Metrics of an output comparison and, when given, of an LSE comparison (lse_*; rows whose
/// LSE is -inf in both count as equal).
MetricSet metric_set(const metrics::Comparison& out, const metrics::Comparison* lse);

class ToleranceTable {
 public:
  /// The table compiled into the binary (conformance/tolerances.json at configure time).
  static const ToleranceTable& builtin();
  static ToleranceTable load(const std::filesystem::path& file);
  /// Throws attest::Error naming `source`, the row and the defect.
  static ToleranceTable parse(std::string_view json_text, std::string_view source);

  /// First row whose globs match; throws attest::Error when none does.
  [[nodiscard]] const ToleranceRow& lookup(std::string_view recipe_label, std::string_view check) const;
  [[nodiscard]] const std::vector<ToleranceRow>& rows() const { return rows_; }
  /// Provenance, recorded in every report: "built-in tolerances.json" or the file path, the
  /// hash of its exact text, and whether it is the table compiled into this binary.
  [[nodiscard]] const std::string& source() const { return source_; }
  [[nodiscard]] const std::string& hash() const { return hash_; }
  [[nodiscard]] bool is_builtin() const { return builtin_; }

 private:
  std::vector<ToleranceRow> rows_;
  std::string source_, hash_;
  bool builtin_ = false;
};

struct Judgement {
  bool pass = true;
  std::string reason;      ///< the first broken bound, with its arithmetic; empty when passed
  nlohmann::json figures;  ///< per metric: measured, budget, floor, alpha, beta, eps, bound, ok
};

/// The generic comparator. `measured` may also hold "cosine", "rel_l1" and "bad_fraction" for
/// the absolute bounds. A NaN measurement never passes. A bounded metric missing from
/// `measured` (e.g. LSE of a kernel without LSE) is skipped and listed under "skipped".
Judgement judge(const ToleranceRow& row, const MetricSet& measured, const MetricSet& budget,
                const MetricSet& floor);

/// Fraction of elements of `test` that are bad against `ref` under `bf` (non-finite pairs that
/// differ count as bad). Same logical shapes; f32 or f64.
double bad_fraction(const Tensor& test, const Tensor& ref, const BadFraction& bf);

}  // namespace attest::conformance
