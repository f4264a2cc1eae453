#pragma once
/// `attest e2e study`: the end-to-end noise-floor study on the synthetic pipeline. Runs (or
/// imports) the reference, the floor run (the reference kernel on K/V-reversed tokens) and each
/// kernel under test, encodes them losslessly, compares them with attest_e2e_compare (PSNR, SSIM,
/// audio SNR/cosine, global statistics, `within floor` / `outside floor`) and adds the per-step
/// latent divergence of every run from the reference (how fast noise at the floor grows), in one
/// report: study.md, study.html, study.json, strip.png, divergence.svg, runs/<n>-<label>.mkv/.wav.
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "attest/e2e/compare.hpp"
#include "attest/e2e/synth.hpp"

namespace attest::e2e {

struct StudyReport {
  StudyRuns runs;
  std::vector<std::vector<StepDivergence>> divergence;  ///< per run (reference: all zero)
  CompareReport compare;
  bool floor_degenerate = false;  ///< the floor run is bit-identical to the reference: nothing to judge against
};

/// The comparison options of a study: `compare`'s defaults with PSNR and SNR margins of 3 dB (a
/// factor 2 in MSE): the floor is one sample of a noisy quantity, and a bf16 kernel (P rounded to
/// bf16 in every call, where the floor only reorders FP32 sums) measured 0.9 dB (PSNR) and 2.6 dB
/// (SNR) below the floor at the CI size (docs/e2e-synth.md).
CompareOptions study_compare_defaults();

/// Encodes `runs` into `dir`/runs, compares them and stages every report file for `dir` into
/// `out` (the caller commits). The encoded runs are written to a private work directory under
/// `dir` first (the comparison reads files) and staged from there; the work directory is removed.
StudyReport run_study(StudyRuns runs, const std::filesystem::path& dir, const CompareOptions& opt, OutputFiles& out,
                      const std::function<void(const std::string&)>& log = {});

/// Exit status of a study: 0 when every test run is within the floor, 1 when one is outside it
/// or the floor is degenerate.
int study_exit_code(const StudyReport& r);

/// The study's own parts of the reports.
std::string study_markdown(const StudyReport& r);
nlohmann::json study_json(const StudyReport& r);
std::string divergence_svg(const StudyReport& r);

}  // namespace attest::e2e
