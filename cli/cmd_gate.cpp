// `attest gate` and `attest qualify`: run a profile's case set through every check and report.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "attest/conformance/gate.hpp"
#include "attest/core/output_files.hpp"
#include "attest/core/status.hpp"
#include "attest/kernels/plugin_loader.hpp"
#include "commands.hpp"

namespace attest::cli {
namespace {

namespace cf = attest::conformance;

struct GateArgs {
  std::string profile, cases, kernel, recipe, check, shard, out, junit, json, markdown, tolerances;
  std::vector<std::string> plugins;
  int jobs = static_cast<int>(std::max(1u, std::thread::hardware_concurrency())), reruns = 5;
  bool resume = false, quiet = false;
};

void add_common(CLI::App* c, GateArgs& a) {
  c->add_option("--kernel", a.kernel, "Kernel glob (mutants join only a glob that matches mutants alone, e.g. 'mutant*')");
  c->add_option("--recipe", a.recipe, "Recipe glob (named recipe labels or full strings)");
  c->add_option("--check", a.check, "Check globs, comma-separated (see `attest list checks`)");
  c->add_option("--shard", a.shard, "i/n: run group i of every n (default GTEST_SHARD_INDEX/GTEST_TOTAL_SHARDS)");
  c->add_option("--jobs", a.jobs, "Worker threads over case groups (default: hardware threads)")->check(CLI::Range(1, 1024));
  c->add_option("--junit", a.junit, "Also write JUnit XML here");
  c->add_option("--json", a.json, "Also write the JSON report here");
  c->add_option("--markdown", a.markdown, "Also write the Markdown report here");
  c->add_flag("--resume", a.resume, "Skip cases already in OUT/results.jsonl (and report them)");
  c->add_option("--tolerances", a.tolerances, "Tolerance table JSON (default: the built-in conformance/tolerances.json)");
  c->add_option("--reruns", a.reruns, "Determinism reruns per case")->check(CLI::Range(1, 10000));
  c->add_flag("--quiet", a.quiet, "No progress output");
  c->add_option("--plugin", a.plugins, "Load a kernel plugin (shared library, docs/plugin.md); its kernels join the profile. Repeatable")
      ->allow_extra_args(false);
}

// Progress: a redrawn bar on a terminal, plain lines otherwise (each non-passed case, and a
// line every 10%). Every non-passed case prints its repro line.
class Progress {
 public:
  Progress(bool quiet, std::string run_flags)
      : quiet_(quiet), tty_(::isatty(2) == 1), t0_(std::chrono::steady_clock::now()), run_flags_(std::move(run_flags)) {}
  void operator()(const cf::Result& r, std::size_t done, std::size_t total) {
    const bool bad = !cf::verdict_ok(r.outcome.verdict);
    failed_ += bad;
    if (quiet_ && !bad) return;
    const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
    if (tty_) std::fputs("\r\033[K", stderr);
    if (bad)
      std::fprintf(stderr, "%s %s %s %s: %s\n  attest run%s '%s'\n", std::string(cf::verdict_name(r.outcome.verdict)).c_str(),
                   r.kernel.c_str(), r.recipe.c_str(), r.check.c_str(), r.outcome.reason.c_str(), run_flags_.c_str(),
                   r.descriptor.c_str());
    if (quiet_) return;
    if (tty_) {
      const int width = 30, fill = total ? static_cast<int>(width * done / total) : width;
      std::fprintf(stderr, "[%s%s] %zu/%zu  not passed %zu  %.1f s  %s", std::string(static_cast<std::size_t>(fill), '#').c_str(),
                   std::string(static_cast<std::size_t>(width - fill), '.').c_str(), done, total, failed_, t,
                   (r.kernel + " " + r.check).c_str());
      if (done == total) std::fputs("\n", stderr);
    } else if (total && (done * 10 / total != last_decile_ || done == total)) {
      last_decile_ = done * 10 / total;
      std::fprintf(stderr, "gate: %zu/%zu cases, %zu not passed, %.1f s\n", done, total, failed_, t);
    }
    std::fflush(stderr);
  }

 private:
  bool quiet_, tty_;
  std::chrono::steady_clock::time_point t0_;
  std::size_t failed_ = 0, last_decile_ = 0;
  std::string run_flags_;  // --plugin options a repro line needs
};

int run(const GateArgs& a, const std::string& cases, const std::string& profile, bool qualify) {
  std::unique_ptr<cf::ToleranceTable> tol;
  if (!a.tolerances.empty()) tol = std::make_unique<cf::ToleranceTable>(cf::ToleranceTable::load(a.tolerances));
  cf::GateOptions o;
  o.profile = cf::Profile::load(profile);
  std::string run_flags;
  for (const auto& path : a.plugins) {
    for (const auto& k : kernels::load_plugin(path).kernels) o.profile.kernels.push_back(k);
    run_flags += " --plugin '" + path + "'";
  }
  o.cases = cf::CaseFile::load(cases.empty() ? (qualify ? o.profile.qualify_cases : o.profile.cases) : cases);
  o.selection = {a.kernel, a.recipe, a.check};
  o.shard = a.shard.empty() ? cf::shard_from_environment() : cf::parse_shard(a.shard);
  o.jobs = a.jobs;
  o.resume = a.resume;
  o.tolerances = tol.get();
  o.check.determinism_runs = a.reruns;
  const std::filesystem::path out = a.out;
  o.journal = out / "results.jsonl";
  Progress progress(a.quiet, run_flags);
  o.on_result = [&](const cf::Result& r, std::size_t d, std::size_t t) { progress(r, d, t); };
  auto rep = cf::run_gate(o);

  std::string md = cf::markdown_report(rep);
  // A qualification names what it was judged by: only the built-in table and a clean build can
  // say QUALIFIED (a replaced table or uncommitted code is not what the commit names).
  std::vector<std::string> blockers;
  if (qualify) {
    const auto& m = rep.meta;
    if (!m["tolerances"].value("builtin", false))
      blockers.push_back("tolerance table " + m["tolerances"].value("source", std::string("?")) + " is not the built-in one");
    if (m.value("dirty", true)) blockers.push_back("the build is dirty (tracked files differ from commit " + m["commit"].get<std::string>() + ")");
    const bool qualified = rep.exit_code() == 0 && blockers.empty();
    std::string why;
    for (const auto& b : blockers) why += "- refused: " + b + "\n";
    md = fmt::format("# attest qualify: {}\n\n{}- device: {}\n- driver: {}\n- host: {}\n- suite commit: `{}{}`\n- tolerances: {} "
                     "({})\n- profile: `{}` (fp8 {}, mx {})\n- case set: `{}`\n\n",
                     qualified ? "QUALIFIED" : "NOT QUALIFIED", why, m["device"].get<std::string>(),
                     m["driver"].get<std::string>(), m["host"].get<std::string>(), m["commit"].get<std::string>(),
                     m.value("dirty", true) ? "+dirty" : "", m["tolerances"].value("source", std::string("?")),
                     m["tolerances"].value("hash", std::string("?")), m["profile"].get<std::string>(),
                     m["fp8"].get<std::string>(), m["mx"].get<std::string>(), m["cases"].get<std::string>()) +
         md;
  }
  const auto json = cf::json_report(rep).dump(2) + "\n";
  const auto junit = cf::junit_report(rep);
  const auto table = cf::summary_table(rep);
  OutputFiles files;
  const std::string stem = qualify ? "qualify" : "gate";
  files.stage(out / (stem + ".md"), md);
  files.stage(out / (stem + ".json"), json);
  files.stage(out / "junit.xml", junit);
  files.stage(out / "summary.txt", table);
  if (!a.junit.empty()) files.stage(a.junit, junit);
  if (!a.json.empty()) files.stage(a.json, json);
  if (!a.markdown.empty()) files.stage(a.markdown, md);
  files.commit();
  std::fputs(table.c_str(), stdout);
  for (const auto& b : blockers) std::printf("qualify: refused: %s\n", b.c_str());
  const int code = rep.exit_code() != 0 ? rep.exit_code() : blockers.empty() ? 0 : 1;
  std::printf("%s: %s (%.1f s); reports in %s\n", stem.c_str(), code == 0 ? (qualify ? "QUALIFIED" : "PASSED") : (qualify ? "NOT QUALIFIED" : "FAILED"),
              rep.seconds, out.c_str());
  return code;
}

}  // namespace

static void add_gate_command(CLI::App& app) {
  auto a = std::make_shared<GateArgs>();
  auto* c = app.add_subcommand("gate", "Run a profile's case set through every check; exit 0 all passed, 1 any failure");
  c->add_option("--profile", a->profile, "cpu, sm90, gfx942, gfx950, gfx1201 or a profile JSON file")->default_val("cpu");
  c->add_option("--cases", a->cases, "smoke, ci, nightly, qualify or a case file (default: the profile's set)");
  c->add_option("--out", a->out, "Directory for results.jsonl and the reports")->default_val("out/gate");
  add_common(c, *a);
  c->callback([a] { set_exit(run(*a, a->cases, a->profile, false)); });

  auto q = std::make_shared<GateArgs>();
  auto* qc = app.add_subcommand("qualify", "Gate the detected device with its profile's qualify case set; writes a report "
                                           "naming device, driver and suite commit");
  qc->add_option("--profile", q->profile, "Override the detected profile");
  qc->add_option("--cases", q->cases, "Override the profile's qualify case set");
  qc->add_option("--out", q->out, "Directory for the qualify report")->default_val("out/qualify");
  add_common(qc, *q);
  qc->callback([q] { set_exit(run(*q, q->cases, q->profile.empty() ? cf::detect_profile() : q->profile, true)); });
}

ATTEST_REGISTER_COMMAND(40, add_gate_command);

}  // namespace attest::cli
