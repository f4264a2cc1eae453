#pragma once
/// The gate runner and its reports. A gate run expands a case file for a profile, shards the
/// groups (kernel, recipe, problem, dist, seed), runs every check of a group on one thread with
/// shared inputs and oracles, appends each result to a JSONL journal as it finishes (one
/// flushed line per case: a crash loses nothing; --resume skips what the journal holds) and
/// ends with a summary table, JSON, Markdown and JUnit XML.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "attest/conformance/check.hpp"
#include "attest/conformance/suite.hpp"
#include "attest/conformance/verdict.hpp"

namespace attest::conformance {

struct Shard {
  int index = 0, count = 1;  ///< 0-based index, as GTEST_SHARD_INDEX
};
/// "i/n" with 0 <= i < n; throws attest::Error.
Shard parse_shard(std::string_view s);
/// GTEST_SHARD_INDEX / GTEST_TOTAL_SHARDS when both are set, else {0, 1}.
Shard shard_from_environment();

struct GateOptions {
  Profile profile;
  CaseFile cases;
  Selection selection;
  Shard shard;
  int jobs = 1;  ///< worker threads over groups; each runs OpenMP code single-threaded
  std::filesystem::path journal;  ///< JSONL path; empty = none
  bool resume = false;
  CheckOptions check;
  const ToleranceTable* tolerances = nullptr;  ///< nullptr = built-in table
  /// Called after each case, serialised (done counts resumed cases too).
  std::function<void(const Result&, std::size_t done, std::size_t total)> on_result;
  /// > 0: this process is worker N of `attest gate --isolate` (docs/gate.md, "Fault
  /// containment"): one case at a time (jobs is ignored); its part of the journal opens with a
  /// {"worker": {"index", "pid"}} line and every check is preceded by an {"inflight": <the
  /// case's Result>, "t": unix time} line, so the supervisor can write the fault row of the
  /// check a dead process was in; after a fault row of its own the run stops (GateReport::stopped)
  /// so that the next case gets a fresh process (a sticky device error breaks the context);
  /// meta.workers lists every worker of the journal and this one.
  int isolate_worker = 0;
};

/// Coverage of one kernel x check: how many selected cases it judged (passed, failed, ...: all
/// but unsupported) and passed, and whether the kernel declares the check (Check::declared_by).
struct Coverage {
  std::string kernel, check;
  std::size_t cases = 0, judged = 0, passed = 0;
  bool declared = false;
  std::string first_unsupported;  ///< reason of the first unsupported case, for the message
};

struct GateReport {
  nlohmann::json meta;               ///< profile, case set, shard, suite commit, device ...
  /// Setup and coverage errors (each fails the gate): a required kernel missing; a declared
  /// kernel x check with cases and no passing one (unsharded runs only).
  std::vector<std::string> errors;
  std::vector<Coverage> coverage;    ///< per kernel x check, in result order
  std::vector<Result> results;       ///< in case order (resumed ones included)
  std::size_t resumed = 0;
  double seconds = 0;
  /// An isolated worker (GateOptions::isolate_worker) stopped after a fault row: the report is
  /// partial (no coverage, no meta) and must not be written; the supervisor starts a fresh one.
  bool stopped = false;

  /// 0 when every verdict is passed or unsupported and there is no setup error, else 1.
  [[nodiscard]] int exit_code() const;
};

GateReport run_gate(const GateOptions& opt);
/// Runs the given cases (every check when a case has none) without a journal.
std::vector<Result> run_cases(const std::vector<Case>& cases, const ToleranceTable& tol, const CheckOptions& copt);

/// The built-in profile of the device this binary runs on: "cpu" for a build without a GPU
/// backend; "sm90" for CUDA; for HIP the gfx target from the KFD topology (gfx942, gfx950,
/// gfx1201). Throws attest::Error when a HIP device is not one of those.
std::string detect_profile();

/// What the suite and the host are: commit (embedded at configure time), device, driver.
nlohmann::json suite_info();

/// Plain-text table kernel x recipe x check with verdict counts.
std::string summary_table(const GateReport& r);
/// Markdown for a PR comment: headline, counts table, failures with repro lines.
std::string markdown_report(const GateReport& r);
/// JUnit XML: one testsuite per kernel/recipe, one testcase per case.
std::string junit_report(const GateReport& r);
nlohmann::json json_report(const GateReport& r);
/// Human dump of one result (all figures, floor, first mismatches) for `attest run`.
std::string dump_result(const Result& r);

}  // namespace attest::conformance
