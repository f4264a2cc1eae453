// `attest e2e synth`: one run of the synthetic diffusion pipeline (e2e/synth.hpp) with any
// registered kernel + recipe as its attention; `attest e2e study`: reference, floor pair and
// kernels, compared end to end (e2e/study.hpp).
#include <cstdio>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "attest/core/output_files.hpp"
#include "attest/core/status.hpp"
#include "attest/e2e/study.hpp"
#include "attest/e2e/synth.hpp"
#include "attest/e2e/synth_io.hpp"
#include "attest/kernels/kernel.hpp"
#include "commands.hpp"

namespace attest::cli {
namespace {

struct SynthArgs {
  std::string kernel, recipe, size = "64x48", video, audio, latents, trace, trace_ref;
  e2e::SynthConfig cfg;
  bool quiet = false;
};

void parse_size(const std::string& s, e2e::SynthConfig& cfg) {
  const auto x = s.find('x');
  try {
    if (x == std::string::npos) throw std::invalid_argument("");
    std::size_t a = 0, b = 0;
    cfg.width = std::stoi(s.substr(0, x), &a);
    cfg.height = std::stoi(s.substr(x + 1), &b);
    if (a != x || b != s.size() - x - 1) throw std::invalid_argument("");
  } catch (const std::exception&) {
    throw Error("--size '" + s + "': expected WIDTHxHEIGHT in pixels, e.g. 64x48");
  }
}

void add_config_options(CLI::App* c, SynthArgs& a) {
  c->add_option("--steps", a.cfg.steps, "Euler steps")->capture_default_str();
  c->add_option("--frames", a.cfg.frames, "Video frames (8 audio tokens per frame)")->capture_default_str();
  c->add_option("--size", a.size, "Frame size WIDTHxHEIGHT in pixels (multiples of 8)")->capture_default_str();
  c->add_option("--seed", a.cfg.seed, "Noise seed")->capture_default_str();
  c->add_option("--weights-seed", a.cfg.weights_seed, "Seed of the model's random weights")->capture_default_str();
  c->add_option("--blocks", a.cfg.blocks, "Transformer blocks")->capture_default_str();
}

nlohmann::json config_json(const e2e::SynthConfig& c) {
  return {{"frames", c.frames}, {"width", c.width}, {"height", c.height}, {"steps", c.steps}, {"seed", c.seed},
          {"weights_seed", c.weights_seed}, {"dim", c.dim}, {"heads", c.heads}, {"blocks", c.blocks}, {"mlp", c.mlp},
          {"tokens", c.tokens()}, {"video_tokens", c.video_tokens()}, {"audio_tokens", c.audio_tokens()},
          {"attention_problem", to_string(c.attention_problem())}};
}

void run_synth_command(SynthArgs& a) {
  parse_size(a.size, a.cfg);
  if (auto st = a.cfg.validate(); !st) throw Error(st.reason());
  if (a.video.empty() && a.audio.empty() && a.latents.empty() && a.trace.empty())
    throw Error("e2e synth: no output requested (give --video, --audio, --latents or --trace)");
  if (!a.trace_ref.empty() && a.trace.empty()) throw Error("--trace-ref needs --trace FILE to write the divergence to");
  const auto kc = e2e::choose_kernel(a.kernel, a.recipe);
  // Read the reference latents before running, so a bad file fails fast.
  std::vector<float> ref;
  if (!a.trace_ref.empty()) ref = e2e::read_latents(a.trace_ref, a.cfg);
  const auto res = e2e::run_synth(a.cfg, *kc.kernel, kc.recipe, [&](int s) {
    if (!a.quiet) std::fprintf(stderr, "\rstep %d/%d", s, a.cfg.steps);
  });
  if (!a.quiet) std::fprintf(stderr, "\n");
  OutputFiles out;
  if (!a.video.empty()) e2e::stage_video(out, a.video, a.cfg, res);
  if (!a.audio.empty()) e2e::stage_audio(out, a.audio, res);
  if (!a.latents.empty()) e2e::stage_latents(out, a.latents, a.cfg, res);
  if (!a.trace.empty()) {
    nlohmann::json j{{"kernel", kc.kernel->name()}, {"recipe", kc.recipe_label}, {"reverse_kv", a.cfg.reverse_kv},
                     {"config", config_json(a.cfg)}, {"attention_calls", res.attention_calls},
                     {"attention_seconds", res.attention_seconds}, {"total_seconds", res.total_seconds}};
    if (!a.trace_ref.empty()) j["trace_ref"] = a.trace_ref;
    const std::vector<e2e::StepDivergence> div = ref.empty() ? std::vector<e2e::StepDivergence>{} : e2e::latent_divergence(a.cfg, res.latents, ref, res.step_t);
    nlohmann::json steps = nlohmann::json::array();
    const std::size_t per = static_cast<std::size_t>(a.cfg.tokens() * e2e::SynthArch::kChannels);
    for (std::size_t s = 0; s < res.step_t.size(); ++s) {
      double ss = 0;
      for (std::size_t i = 0; i < per; ++i) ss += static_cast<double>(res.latents[s * per + i]) * res.latents[s * per + i];
      nlohmann::json st{{"step", s}, {"t", res.step_t[s]}, {"latent_rms", std::sqrt(ss / static_cast<double>(per))}};
      if (!div.empty()) {
        const auto& d = div[s];
        st["rel_l2"] = d.rel_l2;
        st["max_abs"] = d.max_abs;
        st["video_rel_l2"] = d.video_rel_l2;
        st["audio_rel_l2"] = d.audio_rel_l2;
        st["mismatches"] = d.mismatches;
      }
      steps.push_back(st);
    }
    j["steps"] = steps;
    out.stage(a.trace, j.dump(2) + "\n");
  }
  out.commit();
  std::printf("e2e synth: kernel %s recipe %s%s, %lld tokens (%lld video, %lld audio), %d steps, %.2f s (attention %.2f s)\n",
              kc.kernel->name().c_str(), kc.recipe_label.c_str(), a.cfg.reverse_kv ? " reverse-kv" : "",
              static_cast<long long>(a.cfg.tokens()), static_cast<long long>(a.cfg.video_tokens()),
              static_cast<long long>(a.cfg.audio_tokens()), a.cfg.steps, res.total_seconds, res.attention_seconds);
  set_exit(0);
}

struct StudyArgs {
  SynthArgs synth;
  std::vector<std::string> kernels;
  std::string reference = "cpu.tiled.f32:f32", out, import, ssim = "wang";
  std::vector<std::int64_t> strip_frames;
  e2e::Margins margins = e2e::study_compare_defaults().margins;
};

void run_study_command(StudyArgs& a) {
  e2e::CompareOptions opt = e2e::study_compare_defaults();
  opt.margins = a.margins;
  opt.strip_frames = a.strip_frames;
  opt.ssim = metrics::parse_ssim_preset(a.ssim);
  e2e::StudyRuns runs;
  const auto log = [&](const std::string& l) {
    if (!a.synth.quiet) std::fprintf(stderr, "%s\n", l.c_str());
  };
  if (!a.import.empty()) {
    if (!a.kernels.empty()) throw Error("--import: the runs come from the directory; --kernels cannot be added to them");
    runs = e2e::read_runs(a.import);
  } else {
    if (a.kernels.empty()) throw Error("e2e study: --kernels is required (or --import DIR)");
    parse_size(a.synth.size, a.synth.cfg);
    if (auto st = a.synth.cfg.validate(); !st) throw Error(st.reason());
    runs = e2e::execute_runs(a.synth.cfg, e2e::study_runs(a.reference, a.kernels), log);
  }
  OutputFiles out;
  const auto r = e2e::run_study(std::move(runs), a.out, opt, out, log);
  out.commit();
  std::fputs(e2e::study_markdown(r).c_str(), stdout);
  std::fputs(e2e::to_markdown(r.compare).c_str(), stdout);
  std::printf("\nwrote %s/study.md, study.html, study.json, strip.png, divergence.svg, runs/\n", a.out.c_str());
  set_exit(e2e::study_exit_code(r));
}

void add_e2e_study_command(CLI::App& e2e) {
  auto a = std::make_shared<StudyArgs>();
  auto* c = e2e.add_subcommand("study", "Reference, floor pair (K/V reversed) and kernels through the synthetic pipeline, "
                                        "compared against the floor, with per-step divergence (exit 1: a run outside the floor)");
  c->add_option("--kernels", a->kernels, "Kernels under test, KERNEL[:RECIPE], comma-separated")->delimiter(',');
  c->add_option("--reference", a->reference, "Exact reference KERNEL:RECIPE; the floor run is it on K/V-reversed tokens")
      ->capture_default_str();
  add_config_options(c, a->synth);
  c->add_option("--out", a->out, "Output directory (study.md, study.html, study.json, strip.png, divergence.svg, runs/)")->required();
  c->add_option("--import", a->import, "Read the runs from an attest_synth_runs directory instead of running them here");
  c->add_option("--ssim", a->ssim, "SSIM preset: wang, skimage, opencv, ffmpeg")->capture_default_str();
  c->add_option("--strip-frames", a->strip_frames, "Frames of the strip, comma-separated (default: up to 4 spread)")->delimiter(',');
  c->add_option("--margin-psnr", a->margins.psnr_db, "dB a run's PSNR may fall below the floor run's")->capture_default_str();
  c->add_option("--margin-ssim", a->margins.ssim, "SSIM a run may fall below the floor run's")->capture_default_str();
  c->add_option("--margin-snr", a->margins.snr_db, "dB a run's audio SNR may fall below the floor run's")->capture_default_str();
  c->add_option("--margin-cosine", a->margins.cosine, "audio cosine a run may fall below the floor run's")->capture_default_str();
  c->add_option("--margin-stats", a->margins.stats_rel, "relative widening of the exact runs' spread of global statistics")
      ->capture_default_str();
  c->add_flag("--quiet", a->synth.quiet, "No progress on stderr");
  c->callback([a] { run_study_command(*a); });
}

}  // namespace

static void add_e2e_synth_commands(CLI::App& app) {
  // The `e2e` parent is shared with `e2e compare` (cmd_e2e.cpp).
  CLI::App* e2e = e2e_app(app);
  auto a = std::make_shared<SynthArgs>();
  auto* c = e2e->add_subcommand("synth", "Run the synthetic video+audio diffusion pipeline with one kernel as its attention");
  c->add_option("--kernel", a->kernel, "Registered kernel (attest list kernels)")->required();
  c->add_option("--recipe", a->recipe, "Recipe (named or full string); default: the kernel's first");
  add_config_options(c, *a);
  c->add_flag("--reverse-kv", a->cfg.reverse_kv, "Feed K/V in reversed token order (same exact attention, other summation order)");
  c->add_option("--video", a->video, "Lossless video: .mkv/.avi (FFV1) or a directory of PNG frames");
  c->add_option("--audio", a->audio, "Audio: WAV, mono 32-bit float, 16 kHz");
  c->add_option("--latents", a->latents, "Per-step latents (.npy [steps+1, tokens, 16]); a later run's --trace-ref");
  c->add_option("--trace", a->trace, "Per-step trace JSON (latent rms; divergence from --trace-ref)");
  c->add_option("--trace-ref", a->trace_ref, "Reference latents (.npy from --latents) for the per-step divergence");
  c->add_flag("--quiet", a->quiet, "No progress on stderr");
  c->callback([a] { run_synth_command(*a); });
  add_e2e_study_command(*e2e);
}

ATTEST_REGISTER_COMMAND(110, add_e2e_synth_commands);

}  // namespace attest::cli
