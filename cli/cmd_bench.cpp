// `attest bench`: throughput of registered kernels on model shapes (docs/bench.md).
#include <unistd.h>

#include <cstdio>
#include <memory>

#include <fmt/format.h>

#include "attest/conformance/bench.hpp"
#include "attest/core/output_files.hpp"
#include "commands.hpp"

namespace attest::cli {
namespace {

namespace cf = attest::conformance;

struct BenchArgs {
  std::string kernel, recipe, shapes = "cpu-small", json, markdown, dist = "normal";
  int repeat = 10, warmup = 2;
  double min_sample_ms = 2.0, max_gflop = 0;
  std::uint64_t seed = 1;
  bool with_preprocessing = false, graph = false, quiet = false;
};

int run(const BenchArgs& a) {
  cf::BenchOptions o;
  o.kernel = a.kernel;
  o.recipe = a.recipe;
  o.shapes = cf::load_shapes(a.shapes);
  o.dist = a.dist;
  o.seed = a.seed;
  o.repeat = a.repeat;
  o.warmup = a.warmup;
  o.min_sample_ms = a.min_sample_ms;
  o.max_gflop = a.max_gflop;
  o.with_preprocessing = a.with_preprocessing;
  o.graph = a.graph;
  if (!a.quiet)
    o.on_row = [](const nlohmann::json& r, std::size_t done, std::size_t total) {
      const std::string st = r.value("status", "");
      if (st == "timed")
        std::fprintf(stderr, "bench %zu/%zu: %s %s %s: %.4g ms median (spread %.1f%%), %.4g TFLOP/s\n", done, total,
                     r.value("kernel", "").c_str(), r.value("recipe", "").c_str(), r.value("shape", "").c_str(),
                     r["median_ms"].get<double>(), 100 * r["spread"].get<double>(), r["tflops"].get<double>());
      else
        std::fprintf(stderr, "bench %zu/%zu: %s %s %s: %s (%s)\n", done, total, r.value("kernel", "").c_str(),
                     r.value("recipe", "").c_str(), r.value("shape", "").c_str(), st.c_str(), r.value("reason", "").c_str());
    };
  const auto rep = cf::run_bench(o);
  const std::string md = cf::bench_markdown(rep);
  OutputFiles files;
  if (!a.json.empty()) files.stage(a.json, rep.dump(2) + "\n");
  if (!a.markdown.empty()) files.stage(a.markdown, md);
  files.commit();
  std::fputs(md.c_str(), stdout);
  // A case that errored (a kernel threw on a problem it said it supports) fails the run.
  for (const auto& r : rep["results"])
    if (r.value("status", "") == "error") return 1;
  return 0;
}

}  // namespace

static void add_bench_command(CLI::App& app) {
  auto a = std::make_shared<BenchArgs>();
  auto* c = app.add_subcommand("bench", "Time kernels on model shapes: median and spread, TFLOP/s (GB/s for quantizers); "
                                        "exit 1 when a case errors");
  c->add_option("--kernel", a->kernel, "Kernel glob (default: every non-mutant kernel; 'mutant*' selects mutants)");
  c->add_option("--recipe", a->recipe, "Recipe glob over each kernel's recipes (default: all)");
  c->add_option("--shapes", a->shapes,
                "Shapes file or built-in set: " + [] {
                  std::string s;
                  for (const auto& n : cf::builtin_shape_sets()) s += (s.empty() ? "" : ", ") + n;
                  return s;
                }())
      ->default_val("cpu-small");
  c->add_flag("--with-preprocessing", a->with_preprocessing, "Also time the recipe's Q/K/V quantizers (GB/s)");
  c->add_option("--repeat", a->repeat, "Timed samples per case (warm-up excluded)")->check(CLI::Range(1, 100000))->default_val(10);
  c->add_option("--warmup", a->warmup, "Warm-up calls per case (not timed)")->check(CLI::Range(1, 1000))->default_val(2);
  c->add_option("--min-sample-ms", a->min_sample_ms, "Each sample averages back-to-back calls lasting at least this long")
      ->check(CLI::Range(0.0, 10000.0))
      ->default_val(2.0);
  c->add_option("--max-gflop", a->max_gflop, "Skip cases above this many GFLOP per call (0: no limit)")->check(CLI::Range(0.0, 1e12));
  c->add_option("--dist", a->dist, "Input distribution (datasets/distributions.hpp)")->default_val("normal");
  c->add_option("--seed", a->seed, "Input seed")->default_val(1);
  c->add_flag("--graph", a->graph, "Device kernels: also time graph replay (not implemented for device sides yet: reported as not timed)");
  c->add_option("--json", a->json, "Write the JSON report here");
  c->add_option("--markdown", a->markdown, "Write the Markdown tables here");
  c->add_flag("--quiet", a->quiet, "No progress lines");
  c->callback([a] { set_exit(run(*a)); });
}

ATTEST_REGISTER_COMMAND(90, add_bench_command);

}  // namespace attest::cli
