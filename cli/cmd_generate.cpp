// `attest generate`: deterministic Q, K, V inputs of a problem as .npy files.
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <system_error>

#include "attest/core/output_files.hpp"
#include "attest/core/problem.hpp"
#include "attest/core/status.hpp"
#include "attest/datasets/distributions.hpp"
#include "attest/datasets/npy.hpp"
#include "commands.hpp"

namespace attest::cli {
namespace {

struct GenerateOptions {
  std::string problem, dist, out, dtype = "f32";
  std::uint64_t seed = 0;
};

Tensor to_f64(const Tensor& t) {
  Tensor r(DType::f64, t.shape());
  const float* src = t.data<float>();
  double* dst = r.data<double>();
  for (std::int64_t i = 0; i < t.numel(); ++i) dst[i] = src[i];  // exact widening
  return r;
}

void run_generate(const GenerateOptions& o) {
  const Problem p = parse_problem(o.problem);
  const auto dist = datasets::parse_distribution(o.dist);
  if (o.dtype != "f32" && o.dtype != "f64") throw Error("--dtype '" + o.dtype + "' is not supported (valid: f32, f64)");
  const datasets::Qkv qkv = datasets::generate_qkv(p, dist, o.seed);

  const std::filesystem::path dir = o.out;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec || !std::filesystem::is_directory(dir)) throw Error(dir.string() + ": cannot create output directory" + (ec ? ": " + ec.message() : ""));

  OutputFiles out;
  const std::pair<const char*, const Tensor*> files[] = {{"q.npy", &qkv.q}, {"k.npy", &qkv.k}, {"v.npy", &qkv.v}};
  for (const auto& [name, t] : files) datasets::write_npy(out, dir / name, o.dtype == "f64" ? to_f64(*t) : *t);
  out.commit();
  for (const auto& [name, t] : files)
    std::printf("%s %s %s\n", (dir / name).string().c_str(), shape_string(t->shape()).c_str(), o.dtype.c_str());
  std::printf("problem %s dist %s seed %llu\n", to_string(p).c_str(), o.dist.c_str(), static_cast<unsigned long long>(o.seed));
  set_exit(0);
}

}  // namespace

static void add_generate_command(CLI::App& app) {
  auto opts = std::make_shared<GenerateOptions>();
  std::string names;
  for (auto d : datasets::all_distributions()) names += (names.empty() ? "" : ", ") + std::string(datasets::distribution_name(d));
  auto* cmd = app.add_subcommand("generate", "Write deterministic q.npy, k.npy, v.npy (logical bshd; packed varlen when ragged)");
  cmd->add_option("--problem", opts->problem, "Problem string, e.g. b2h24k8s4096t4096d128:mask=causal_br")->required();
  cmd->add_option("--dist", opts->dist, "Distribution: " + names)->required();
  cmd->add_option("--seed", opts->seed, "Philox seed (64-bit)")->required();
  cmd->add_option("--out", opts->out, "Output directory (created if missing)")->required();
  cmd->add_option("--dtype", opts->dtype, "Element type of the files: f32 (as generated) or f64 (exact widening)")
      ->capture_default_str();
  cmd->callback([opts] { run_generate(*opts); });
}

ATTEST_REGISTER_COMMAND(20, add_generate_command);

}  // namespace attest::cli
