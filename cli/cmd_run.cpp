// `attest run '<case descriptor>'`: rerun one case (every check when it names none) with a
// full dump: all metrics, bounds, noise floor, first mismatches.
#include <cstdio>
#include <memory>

#include "attest/conformance/gate.hpp"
#include "attest/core/output_files.hpp"
#include "attest/kernels/plugin_loader.hpp"
#include "commands.hpp"

namespace attest::cli {

static void add_run_command(CLI::App& app) {
  struct Args {
    std::vector<std::string> descriptor;
    std::string check, json, tolerances;
    std::vector<std::string> plugins;
    int reruns = 5;
  };
  auto a = std::make_shared<Args>();
  auto* c = app.add_subcommand("run", "Rerun one case with a full dump (paste the line a gate failure printed)");
  c->add_option("case", a->descriptor, "Case descriptor, e.g. 'kernel=cpu.tiled.bf16 recipe=bf16 problem=b1h2s64d64 "
                                       "dist=normal seed=1 check=accuracy'")
      ->required();
  c->add_option("--check", a->check, "Override the case's check (globs, comma-separated)");
  c->add_option("--json", a->json, "Write the results as JSON here");
  c->add_option("--tolerances", a->tolerances, "Tolerance table JSON (default: built-in)");
  c->add_option("--reruns", a->reruns, "Determinism reruns")->check(CLI::Range(1, 10000));
  c->add_option("--plugin", a->plugins, "Load a kernel plugin first (docs/plugin.md); repeatable")->allow_extra_args(false);
  c->callback([a] {
    for (const auto& path : a->plugins) kernels::load_plugin(path);
    std::string text;
    for (const auto& part : a->descriptor) text += (text.empty() ? "" : " ") + part;  // unquoted use works too
    auto cs = conformance::parse_case(text);
    if (!a->check.empty()) cs.check = a->check;
    std::unique_ptr<conformance::ToleranceTable> tol;
    if (!a->tolerances.empty()) tol = std::make_unique<conformance::ToleranceTable>(conformance::ToleranceTable::load(a->tolerances));
    conformance::CheckOptions opt;
    opt.determinism_runs = a->reruns;
    const auto results = conformance::run_cases({cs}, tol ? *tol : conformance::ToleranceTable::builtin(), opt);
    std::printf("case: %s\n", conformance::to_string(cs).c_str());
    int code = 0;
    nlohmann::json j = nlohmann::json::array();
    for (const auto& r : results) {
      std::fputs(conformance::dump_result(r).c_str(), stdout);
      if (!conformance::verdict_ok(r.outcome.verdict)) code = 1;
      j.push_back(conformance::to_json(r));
    }
    if (!a->json.empty()) {
      OutputFiles files;
      files.stage(a->json, j.dump(2) + "\n");
      files.commit();
    }
    set_exit(code);
  });
}

ATTEST_REGISTER_COMMAND(50, add_run_command);

}  // namespace attest::cli
