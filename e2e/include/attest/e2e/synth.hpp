#pragma once
/// A synthetic diffusion pipeline whose attention is any registered kernel + recipe: a small
/// DiT-like denoiser with seeded random weights (no model weights to download), a flow-matching
/// Euler sampler over a joint sequence of latent video tokens (frames x h x w patches) and audio
/// latent tokens, and a fixed decoder to RGB frames (uint8) and a mono waveform.
///
/// Numerics model a bf16 inference: weights and activations are bf16 values (rounded to nearest
/// even after every linear layer, norm and residual add), every sum is FP32 in a fixed sequential
/// order, and the sampler state (the latent) is FP32. Because activations are bf16, a perturbation
/// of attention output far below one bf16 ulp (a different summation order) still flips some
/// roundings, and over blocks and steps the flips spread: this is the chaos that makes two exact
/// runs (reference and K/V-reversed) differ, as they do in real video models.
///
/// Determinism: every value is a fixed sequence of correctly rounded IEEE operations (no libm:
/// ReLU instead of SiLU/GELU, in-house sin/cos from datasets/exact_math.hpp; -ffp-contract=off),
/// rows of a matrix product are independent (OpenMP over rows never changes a row's sum order),
/// so a run gives the same bits for any thread count and on any x86-64 host — given a
/// deterministic attention kernel.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "attest/core/output_files.hpp"
#include "attest/core/problem.hpp"
#include "attest/core/recipe.hpp"

namespace attest::kernels {
class Kernel;
}

namespace attest::e2e {

/// Fixed architecture constants (a change here changes every run's bits).
struct SynthArch {
  static constexpr int kPatch = 8;            ///< pixels per latent patch side
  static constexpr int kChannels = 16;        ///< latent channels per token (video and audio)
  static constexpr int kSampleRate = 16000;   ///< audio samples per second
  static constexpr int kFps = 8;              ///< video frames per second
  static constexpr int kAudioHop = 250;       ///< audio samples per audio token (hop)
  static constexpr int kAudioPerFrame = kSampleRate / kFps / kAudioHop;  ///< 8 audio tokens per frame
};

struct SynthConfig {
  int frames = 4;
  int width = 64;   ///< pixels, a multiple of SynthArch::kPatch
  int height = 48;  ///< pixels, a multiple of SynthArch::kPatch
  int steps = 8;    ///< Euler steps from t = 1 (noise) to t = 0
  std::uint64_t seed = 1;              ///< noise seed
  std::uint64_t weights_seed = 2026;   ///< the model: its random weights
  int dim = 128;      ///< model width
  int heads = 2;      ///< attention heads (head_dim = dim / heads)
  int blocks = 4;     ///< transformer blocks
  int mlp = 256;      ///< MLP hidden width
  bool reverse_kv = false;  ///< feed K/V to the kernel in reversed token order (exact math unchanged)

  /// Ok, or the first defect ("--size 60x48: width 60 is not a multiple of 8").
  [[nodiscard]] Status validate() const;
  [[nodiscard]] int patches_w() const { return width / SynthArch::kPatch; }
  [[nodiscard]] int patches_h() const { return height / SynthArch::kPatch; }
  [[nodiscard]] std::int64_t video_tokens() const { return static_cast<std::int64_t>(frames) * patches_w() * patches_h(); }
  [[nodiscard]] std::int64_t audio_tokens() const { return static_cast<std::int64_t>(frames) * SynthArch::kAudioPerFrame; }
  [[nodiscard]] std::int64_t tokens() const { return video_tokens() + audio_tokens(); }
  [[nodiscard]] std::int64_t audio_samples() const { return audio_tokens() * SynthArch::kAudioHop; }
  /// The attention problem every block runs: b1 h<heads> s<tokens> d<dim/heads>, bf16 inputs.
  [[nodiscard]] Problem attention_problem() const;
};

/// What a run produced.
struct SynthResult {
  /// Latents at every step: (steps + 1) x tokens x kChannels floats, step 0 = the initial noise,
  /// step k = after k Euler steps. Tokens: video first (frame, row, column), then audio.
  std::vector<float> latents;
  std::vector<std::uint8_t> frames;  ///< frames x height x width x 3, RGB
  std::vector<float> audio;          ///< audio_samples() mono samples in [-1, 1] at kSampleRate
  std::vector<double> step_t;        ///< t at every latent step (steps + 1 values, 1 ... 0)
  std::int64_t attention_calls = 0;
  double attention_seconds = 0;      ///< wall time spent inside the kernel
  double total_seconds = 0;
};

/// Runs the pipeline with `kernel` under `recipe`. Throws attest::Error when the configuration is
/// invalid or the kernel refuses the attention problem (the message names kernel, recipe,
/// problem and the kernel's reason). `progress(step)` is called after every step when set.
SynthResult run_synth(const SynthConfig& cfg, kernels::Kernel& kernel, const Recipe& recipe,
                      const std::function<void(int)>& progress = {});

/// Looks a kernel up in the registry and parses the recipe ("" = the kernel's first recipe);
/// throws attest::Error naming the unknown kernel (with the registered names) or recipe.
struct KernelChoice {
  kernels::Kernel* kernel = nullptr;
  Recipe recipe;
  std::string recipe_label;
};
KernelChoice choose_kernel(const std::string& name, const std::string& recipe);

/// Divergence of a run's latents from a reference run's, per step (both of the same config).
struct StepDivergence {
  int step = 0;
  double t = 0;
  double rel_l2 = 0;        ///< ||x - ref|| / ||ref|| over every token
  double max_abs = 0;
  double video_rel_l2 = 0;  ///< video tokens only
  double audio_rel_l2 = 0;  ///< audio tokens only
  std::int64_t mismatches = 0;  ///< latent floats whose bits differ
};
/// Throws attest::Error when the two latent sets have different sizes.
std::vector<StepDivergence> latent_divergence(const SynthConfig& cfg, const std::vector<float>& run,
                                              const std::vector<float>& ref, const std::vector<double>& step_t);

}  // namespace attest::e2e

namespace attest::e2e {

/// One run of a study: a kernel + recipe, optionally on K/V-reversed tokens.
struct RunSpec {
  std::string label;  ///< "reference", "floor", or "<kernel>:<recipe>" (":rev" appended when reversed)
  std::string kernel, recipe;
  bool reverse_kv = false;
};

/// The runs of a study: the reference ("K:R"), the floor (the reference on K/V-reversed tokens),
/// then each test kernel "K:R" ("K" alone = its first recipe). Throws attest::Error on a malformed
/// item or an unknown kernel or recipe, before anything runs.
std::vector<RunSpec> study_runs(const std::string& reference, const std::vector<std::string>& kernels);

/// A study's runs and their results, as executed here or read back from a directory that
/// `attest_synth_runs` (or write_runs) produced on another host.
struct StudyRuns {
  SynthConfig cfg;
  std::vector<RunSpec> specs;
  std::vector<SynthResult> results;
  std::string host;  ///< where the runs executed (hostname, device name when known)
};

/// Executes every run in order; `log` gets one line per run.
StudyRuns execute_runs(const SynthConfig& cfg, const std::vector<RunSpec>& specs, const std::function<void(const std::string&)>& log = {});

/// Stages `dir`/manifest.json and per run `dir`/<i>.frames.npy (u8 [F, H, W, 3], RGB),
/// <i>.audio.npy (f32), <i>.latents.npy (f32 [steps+1, tokens, 16]). Portable: no OpenCV.
void write_runs(OutputFiles& out, const std::filesystem::path& dir, const StudyRuns& runs);
/// Reads what write_runs wrote; throws attest::Error naming the file and the defect.
StudyRuns read_runs(const std::filesystem::path& dir);

}  // namespace attest::e2e
