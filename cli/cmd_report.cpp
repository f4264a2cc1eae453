// `attest report diff|merge|html`: join two reports, merge shards, render a page (docs/bench.md).
#include <charconv>
#include <cstdio>
#include <memory>

#include "attest/conformance/report_tools.hpp"
#include "attest/core/output_files.hpp"
#include "attest/core/status.hpp"
#include "commands.hpp"

namespace attest::cli {
namespace {

namespace rp = attest::conformance::report;

struct DiffArgs {
  std::string base, cand, perf = "5%", json, markdown;
  double accuracy = 0.25;
  std::vector<std::string> pairs;
};
struct MergeArgs {
  std::vector<std::string> inputs;
  std::string json, markdown;
};
struct HtmlArgs {
  std::string input, out;
};

double parse_percent(std::string s) {
  if (!s.empty() && s.back() == '%') s.pop_back();
  double v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || p != s.data() + s.size() || v < 0)
    throw Error("--perf-threshold '" + s + "': expected a percentage >= 0 such as 5%");
  return v;
}

int run_diff(const DiffArgs& a) {
  rp::DiffOptions o;
  o.perf_threshold_pct = parse_percent(a.perf);
  o.accuracy_threshold = a.accuracy;
  for (const auto& p : a.pairs) {
    const auto eq = p.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == p.size()) throw Error("--pair '" + p + "': expected BASE_KERNEL=CANDIDATE_KERNEL");
    o.pairs.emplace_back(p.substr(0, eq), p.substr(eq + 1));
  }
  const auto base = rp::load(a.base);
  const auto cand = rp::load(a.cand);
  const auto d = rp::diff(base, cand, o);
  OutputFiles files;
  if (!a.json.empty()) files.stage(a.json, d.json.dump(2) + "\n");
  if (!a.markdown.empty()) files.stage(a.markdown, d.markdown);
  files.commit();
  std::fputs(d.markdown.c_str(), stdout);
  return d.regressions ? 1 : 0;
}

int run_merge(const MergeArgs& a) {
  std::vector<rp::Doc> docs;
  for (const auto& p : a.inputs) docs.push_back(rp::load(p));
  const auto merged = rp::merge(docs);
  rp::Doc d;
  d.kind = docs.front().kind;
  d.path = "merged";
  d.json = merged;
  const auto md = rp::markdown(d);
  OutputFiles files;
  if (!a.json.empty()) files.stage(a.json, merged.dump(2) + "\n");
  if (!a.markdown.empty()) files.stage(a.markdown, md);
  files.commit();
  if (a.json.empty()) std::fputs((merged.dump(2) + "\n").c_str(), stdout);
  else std::fputs(md.c_str(), stdout);
  return merged.value("exit_code", 0);
}

int run_html(const HtmlArgs& a) {
  const auto d = rp::load(a.input);
  OutputFiles files;
  files.stage(a.out, rp::html(d));
  files.commit();
  std::printf("wrote %s\n", a.out.c_str());
  return 0;
}

}  // namespace

static void add_report_command(CLI::App& app) {
  auto* r = app.add_subcommand("report", "Compare, merge and render gate and bench reports");
  r->require_subcommand(1);

  auto d = std::make_shared<DiffArgs>();
  auto* dc = r->add_subcommand("diff", "Join two gate or bench reports by case: base, candidate and ratio per case (performance) "
                                       "and per check figure (accuracy); exit 1 on a regression, 2 on malformed input");
  dc->add_option("BASE", d->base, "Base report (gate.json, results.jsonl or bench.json)")->required();
  dc->add_option("CANDIDATE", d->cand, "Candidate report of the same kind")->required();
  dc->add_option("--perf-threshold", d->perf, "Slowdown that regresses when also beyond the runs' spread (default 5%)");
  dc->add_option("--accuracy-threshold", d->accuracy, "Relative growth of an error figure that regresses when also beyond the floor")
      ->check(CLI::Range(0.0, 1e9))
      ->default_val(0.25);
  dc->add_option("--pair", d->pairs, "BASE_KERNEL=CANDIDATE_KERNEL: join a renamed or substituted kernel (repeatable)");
  dc->add_option("--json", d->json, "Write the diff as JSON here");
  dc->add_option("--markdown", d->markdown, "Write the diff tables as Markdown here");
  dc->callback([d] { set_exit(run_diff(*d)); });

  auto m = std::make_shared<MergeArgs>();
  auto* mc = r->add_subcommand("merge", "Merge the reports of sharded runs (gate --shard i/n; journals and bench reports are "
                                        "concatenated); exit code of the merged gate");
  mc->add_option("REPORTS", m->inputs, "Reports to merge")->required();
  mc->add_option("--json", m->json, "Write the merged report here (default: stdout)");
  mc->add_option("--markdown", m->markdown, "Write the merged Markdown here");
  mc->callback([m] { set_exit(run_merge(*m)); });

  auto h = std::make_shared<HtmlArgs>();
  auto* hc = r->add_subcommand("html", "Render a gate, bench or diff report as one self-contained HTML page");
  hc->add_option("REPORT", h->input, "gate.json, results.jsonl, bench.json or a diff JSON")->required();
  hc->add_option("-o,--out", h->out, "Output HTML file")->required();
  hc->callback([h] { set_exit(run_html(*h)); });
}

ATTEST_REGISTER_COMMAND(100, add_report_command);

}  // namespace attest::cli
