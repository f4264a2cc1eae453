#pragma once
/// `attest report diff|merge|html`: reading, joining, merging and rendering gate and bench
/// reports (docs/bench.md). Reports are JSON: gate.json / qualify.json (meta, counts, results),
/// the gate's results.jsonl journal (one result per line), bench.json (kind "bench"), and the
/// diff report itself (kind "diff", for html). Every reader defect is an attest::Error naming
/// the file and the defect (exit 2 at the CLI).
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace attest::conformance::report {

enum class Kind { gate, bench, diff };
std::string_view kind_name(Kind k);

struct Doc {
  Kind kind = Kind::gate;
  std::string path;
  nlohmann::json json;  ///< normalised: "meta" (object, possibly empty) and "results" (array)
};

/// Reads and validates a report; throws attest::Error("<path>: <defect>").
Doc load(const std::string& path);
/// The same from text (`origin` names it in errors).
Doc parse(const std::string& text, const std::string& origin);

/// Merges shards. Gate reports that carry their shard ("i/n" in meta) must be exactly the n
/// shards of one run (same profile, case set, selection): their groups are interleaved back
/// into the unsharded order (the gate deals group g to shard g % n), so the merged results equal
/// the unsharded run's. Journals and bench reports are concatenated in argument order. A case
/// present twice with different verdicts or figures is an error; identical duplicates (a resumed
/// shard) are kept once. Returns a report of the inputs' kind (gate.json or bench.json shape).
nlohmann::json merge(const std::vector<Doc>& docs);

struct DiffOptions {
  double perf_threshold_pct = 5;    ///< a slowdown beyond this many percent (and beyond the spread) regresses
  double accuracy_threshold = 0.25; ///< an error figure growing by more than this fraction (and beyond the floor) regresses
  /// (base kernel, candidate kernel) pairs joined as one kernel: a renamed or substituted kernel.
  std::vector<std::pair<std::string, std::string>> pairs;
};

struct DiffResult {
  nlohmann::json json;  ///< kind "diff"
  std::string markdown;
  int regressions = 0;
};

/// Joins base and candidate by case (docs/bench.md, "report diff"); throws attest::Error when
/// the two are of different kinds.
DiffResult diff(const Doc& base, const Doc& cand, const DiffOptions& opt);

/// Markdown of a merged or loaded report (gate: the gate's own Markdown; bench: bench_markdown;
/// diff: its Markdown).
std::string markdown(const Doc& doc);

/// A self-contained HTML page (no external resources): summary, tables and inline SVG plots
/// (gate: per check, measured / bound of every figure; bench: TFLOP/s per case; diff: ratios).
std::string html(const Doc& doc);

}  // namespace attest::conformance::report
