// `attest check --capture FILE|DIR`: captured attention calls (docs/capture.md) judged by the
// gate's accuracy rule. Exit 0 every verdict passed, 1 a verdict failed, 2 a malformed capture.
#include <cstdio>
#include <memory>

#include "attest/conformance/capture.hpp"
#include "attest/core/output_files.hpp"
#include "commands.hpp"

namespace attest::cli {

static void add_check_command(CLI::App& app) {
  struct Args {
    std::string capture, recipe, layout, mask, json, markdown, tolerances;
    double scale = 0;
  };
  auto a = std::make_shared<Args>();
  auto* c = app.add_subcommand("check", "Check captured attention calls against FP64 and the recipe's noise floor (docs/capture.md)");
  c->add_option("--capture", a->capture, "A .safetensors capture, an npy capture directory, or a directory of captures")->required();
  c->add_option("--recipe", a->recipe, "Recipe (named or full string); default: metadata, else from q's dtype");
  c->add_option("--layout", a->layout, "bshd or bhsd; default: metadata, else bshd");
  c->add_option("--mask", a->mask, "none, causal_tl or causal_br; default: metadata, else none");
  c->add_option("--scale", a->scale, "Softmax scale; default: metadata, else 1/sqrt(head_dim)")->check(CLI::PositiveNumber);
  c->add_option("--json", a->json, "Write every result as JSON here");
  c->add_option("--markdown", a->markdown, "Write the summary table as Markdown here");
  c->add_option("--tolerances", a->tolerances, "Tolerance table JSON (default: built-in)");
  c->callback([a] {
    conformance::CaptureOptions opt;
    if (!a->recipe.empty()) opt.recipe = a->recipe;
    if (!a->layout.empty()) opt.layout = a->layout;
    if (!a->mask.empty()) opt.mask = a->mask;
    if (a->scale > 0) opt.scale = a->scale;
    std::unique_ptr<conformance::ToleranceTable> tol;
    if (!a->tolerances.empty()) {
      tol = std::make_unique<conformance::ToleranceTable>(conformance::ToleranceTable::load(a->tolerances));
      opt.tolerances = tol.get();
    }
    const auto paths = conformance::find_captures(a->capture);
    const bool many = paths.size() > 1 || !conformance::is_capture(a->capture);
    std::vector<conformance::CaptureResult> results;
    std::vector<conformance::CaptureError> errors;
    for (const auto& p : paths) {
      try {
        results.push_back(conformance::check_capture(conformance::read_capture(p), opt));
      } catch (const Error& e) {
        if (!many) throw;  // one capture: main prints it and exits 2
        errors.push_back({p.string(), e.what()});
        std::fprintf(stderr, "attest: error: %s\n", e.what());
        continue;
      }
      const auto& r = results.back();
      if (many)
        std::printf("%-10s %s  %s  %s%s\n", std::string(conformance::verdict_name(r.verdict())).c_str(), p.filename().string().c_str(),
                    r.problem.c_str(), r.recipe.c_str(), r.reason().empty() ? "" : ("  " + r.reason()).c_str());
      else
        std::fputs(conformance::capture_dump(r).c_str(), stdout);
      std::fflush(stdout);
    }
    const std::string md = conformance::capture_markdown(results, errors);
    if (many) std::printf("\n%s", md.c_str());
    OutputFiles files;
    if (!a->json.empty()) files.stage(a->json, conformance::capture_json(results, errors).dump(2) + "\n");
    if (!a->markdown.empty()) files.stage(a->markdown, md);
    files.commit();
    int code = 0;
    for (const auto& r : results)
      if (!conformance::verdict_ok(r.verdict())) code = 1;
    set_exit(errors.empty() ? code : 2);
  });
}

ATTEST_REGISTER_COMMAND(70, add_check_command);

}  // namespace attest::cli
