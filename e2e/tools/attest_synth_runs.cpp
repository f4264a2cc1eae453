// attest_synth_runs: executes the runs of an e2e study (reference, floor, kernels) with every
// kernel linked into this binary, GPU kernels included, and writes them as npy + manifest.json.
// It links no OpenCV or libsndfile, so a binary built here runs on a device host that has
// neither; `attest e2e study --import DIR` then encodes, compares and reports them here.
#include <cstdio>
#include <exception>

#include <CLI/CLI.hpp>

#include "attest/core/output_files.hpp"
#include "attest/core/status.hpp"
#include "attest/e2e/synth.hpp"
#include "attest/kernels/kernel.hpp"

int main(int argc, char** argv) {
  CLI::App app{"attest_synth_runs: the runs of an e2e study as npy files (for `attest e2e study --import`)"};
  attest::e2e::SynthConfig cfg;
  std::string reference = "cpu.tiled.f32:f32", size = "64x48", out;
  std::vector<std::string> kernels;
  bool list = false, skip_unsupported = false;
  app.add_option("--reference", reference, "Reference KERNEL:RECIPE (the floor is it on K/V-reversed tokens)")->capture_default_str();
  app.add_option("--kernels", kernels, "Test runs KERNEL[:RECIPE], comma-separated")->delimiter(',');
  app.add_option("--steps", cfg.steps, "Euler steps")->capture_default_str();
  app.add_option("--frames", cfg.frames, "Video frames")->capture_default_str();
  app.add_option("--size", size, "WIDTHxHEIGHT pixels (multiples of 8)")->capture_default_str();
  app.add_option("--seed", cfg.seed, "Noise seed")->capture_default_str();
  app.add_option("--weights-seed", cfg.weights_seed, "Model weights seed")->capture_default_str();
  app.add_option("--blocks", cfg.blocks, "Transformer blocks")->capture_default_str();
  app.add_option("--out", out, "Output directory");
  app.add_flag("--list", list, "List the registered kernels and exit");
  app.add_flag("--skip-unsupported", skip_unsupported, "Drop test kernels that refuse the attention problem (reason printed)");
  try {
    app.parse(argc, argv);
    if (list) {
      for (const auto& k : attest::kernels::Registry::instance().all()) {
        std::string rs;
        for (const auto& r : k->recipes()) rs += " " + r;
        std::printf("%s (%s):%s\n", k->name().c_str(), k->backend().c_str(), rs.c_str());
      }
      return 0;
    }
    if (out.empty()) throw attest::Error("--out is required");
    const auto x = size.find('x');
    if (x == std::string::npos) throw attest::Error("--size '" + size + "': expected WIDTHxHEIGHT");
    cfg.width = std::stoi(size.substr(0, x));
    cfg.height = std::stoi(size.substr(x + 1));
    if (auto st = cfg.validate(); !st) throw attest::Error(st.reason());
    auto specs = attest::e2e::study_runs(reference, kernels);
    if (skip_unsupported) {
      std::vector<attest::e2e::RunSpec> kept;
      for (std::size_t i = 0; i < specs.size(); ++i) {
        const auto kc = attest::e2e::choose_kernel(specs[i].kernel, specs[i].recipe);
        if (auto st = kc.kernel->supports(cfg.attention_problem(), kc.recipe); i < 2 || st)
          kept.push_back(specs[i]);
        else
          std::printf("skipped %s: %s\n", specs[i].label.c_str(), st.reason().c_str());
      }
      specs = kept;
    }
    const auto runs = attest::e2e::execute_runs(cfg, specs, [](const std::string& l) { std::printf("%s\n", l.c_str()); std::fflush(stdout); });
    std::filesystem::create_directories(out);
    attest::OutputFiles files;
    attest::e2e::write_runs(files, out, runs);
    files.commit();
    std::printf("wrote %zu runs to %s\n", runs.specs.size(), out.c_str());
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const attest::Error& e) {
    std::fprintf(stderr, "attest_synth_runs: error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "attest_synth_runs: error: %s\n", e.what());
    return 2;
  }
  return 0;
}
