// `attest e2e compare`: reference, floor and labelled test runs (video and/or audio) compared
// with the media metrics; floor verdicts; Markdown / JSON / strip / HTML (e2e/compare.hpp).
// It joins the `e2e` parent subcommand (e2e_app, main.cpp) with `e2e synth` and `e2e study`.
#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "attest/core/output_files.hpp"
#include "attest/core/status.hpp"
#include "attest/e2e/compare.hpp"
#include "commands.hpp"

namespace attest::cli {

namespace {

struct CompareArgs {
  std::string ref, floor, audio_ref, audio_floor, ssim = "wang", channels = "luma";
  std::vector<std::string> tests, audio_tests;
  std::optional<double> psnr_cap;
  double snr_eps = 0;
  bool allow_truncate = false, quiet = false;
  e2e::Margins margins;
  std::vector<std::int64_t> strip_frames;
  std::string json, markdown, html, strip;
  int threads = 0;
};

// LABEL=PATH, split at the first '='.
std::pair<std::string, std::string> split_labelled(const std::string& s, const char* flag) {
  const auto eq = s.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == s.size())
    throw Error(std::string(flag) + " '" + s + "': expected LABEL=PATH");
  return {s.substr(0, eq), s.substr(eq + 1)};
}

void run_compare(const CompareArgs& a) {
  if (a.ref.empty() && a.audio_ref.empty()) throw Error("e2e compare: give --ref and/or --audio-ref");
  if (!a.floor.empty() && a.ref.empty()) throw Error("--floor needs --ref");
  if (!a.audio_floor.empty() && a.audio_ref.empty()) throw Error("--audio-floor needs --audio-ref");
  if (!a.tests.empty() && a.ref.empty()) throw Error("--test needs --ref");
  if (!a.audio_tests.empty() && a.audio_ref.empty()) throw Error("--audio-test needs --audio-ref");
  e2e::CompareInputs in;
  in.reference = {"reference", a.ref, a.audio_ref};
  if (!a.floor.empty() || !a.audio_floor.empty()) in.floor = e2e::RunInput{"floor", a.floor, a.audio_floor};
  // Test runs by label, in the order given; video and audio of one label form one run.
  std::vector<std::string> order;
  std::map<std::string, e2e::RunInput> runs;
  auto add = [&](const std::string& spec, const char* flag, bool audio) {
    auto [label, path] = split_labelled(spec, flag);
    auto [it, fresh] = runs.try_emplace(label, e2e::RunInput{label, {}, {}});
    if (fresh) order.push_back(label);
    auto& slot = audio ? it->second.audio : it->second.video;
    if (!slot.empty()) throw Error(std::string(flag) + ": label '" + label + "' is given twice");
    slot = path;
  };
  for (const auto& t : a.tests) add(t, "--test", false);
  for (const auto& t : a.audio_tests) add(t, "--audio-test", true);
  for (const auto& l : order) in.tests.push_back(runs.at(l));

  e2e::CompareOptions o;
  o.ssim = metrics::parse_ssim_preset(a.ssim);
  o.channels = metrics::parse_channels(a.channels);
  o.psnr_cap_db = a.psnr_cap;
  o.snr_eps = a.snr_eps;
  o.allow_truncate = a.allow_truncate;
  o.margins = a.margins;
  o.strip_frames = a.strip_frames;
  o.threads = a.threads;
  if (!a.strip.empty() && a.ref.empty()) throw Error("--strip needs video (--ref)");
  const e2e::CompareReport r = e2e::compare(in, o);
  OutputFiles out;
  e2e::write_outputs(r, {a.json, a.markdown, a.html, a.strip}, out);
  out.commit();
  if (!a.quiet) std::fputs(e2e::to_markdown(r).c_str(), stdout);
  set_exit(e2e::any_outside_floor(r) ? 1 : 0);
}

}  // namespace

static void add_e2e_compare_command(CLI::App& app) {
  auto a = std::make_shared<CompareArgs>();
  auto* c = e2e_app(app)->add_subcommand(
      "compare", "Compare test runs (video and/or audio) against a reference and judge them against the floor run.\n"
                 "Exit 0: every test run within the floor (or none judged); 1: a run is outside; 2: bad input");
  c->add_option("--ref", a->ref, "Reference video (file OpenCV/FFmpeg reads, or a directory of images)");
  c->add_option("--floor", a->floor, "Floor video: an exact run differing only in summation order (K/V reversed)");
  c->add_option("--test", a->tests, "LABEL=VIDEO, repeatable")->allow_extra_args(false);
  c->add_option("--audio-ref", a->audio_ref, "Reference audio (any format libsndfile reads)");
  c->add_option("--audio-floor", a->audio_floor, "Floor audio");
  c->add_option("--audio-test", a->audio_tests, "LABEL=AUDIO, repeatable (same labels as --test when both are given)")
      ->allow_extra_args(false);
  c->add_option("--ssim", a->ssim, "SSIM preset: wang (default), skimage, opencv, ffmpeg");
  c->add_option("--channels", a->channels, "luma (default: BT.601 full range) or bgr (per channel, pooled)");
  c->add_option("--psnr-cap", a->psnr_cap, "Cap PSNR at this many dB (libvmaf: 60 for 8-bit); default: identical frames are +inf");
  c->add_option("--snr-eps", a->snr_eps, "Added to the audio signal and noise energies (torchmetrics: float32 epsilon)");
  c->add_flag("--allow-truncate", a->allow_truncate, "Compare the common prefix when frame counts or audio lengths differ");
  // One flag per row of the margin table that names one (metrics/media_margins.json); a metric
  // registered with its own margin row gets --margin-<key> without an edit here.
  for (const auto& row : metrics::margin_rows()) {
    std::string flag = row.flag;
    if (flag.empty() && e2e::Margins().other.count(row.key)) {
      flag = "--margin-" + row.key;
      std::replace(flag.begin(), flag.end(), '_', '-');
    }
    if (flag.empty()) continue;
    c->add_option(flag, a->margins.at(row.key), row.help.empty() ? "Verdict margin: " + row.reason : row.help);
  }
  c->add_option("--json", a->json, "Write the JSON report (every per-frame value) here");
  c->add_option("--markdown", a->markdown, "Write the Markdown tables here");
  c->add_option("--html", a->html, "Write the self-contained HTML report here");
  c->add_option("--strip", a->strip, "Write the frame strip PNG here");
  c->add_option("--strip-frames", a->strip_frames, "Frames for the strip, comma-separated (default: 4 spread over the clip)")
      ->delimiter(',')
      ->allow_extra_args(false);
  c->add_option("--threads", a->threads, "Worker threads (default: all)")->check(CLI::Range(0, 1024));
  c->add_flag("--quiet", a->quiet, "Do not print the Markdown tables");
  c->callback([a] { run_compare(*a); });
}

ATTEST_REGISTER_COMMAND(120, add_e2e_compare_command);

}  // namespace attest::cli
