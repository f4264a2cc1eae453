// The e2e study (study.hpp): synthetic runs -> lossless files -> attest_e2e_compare, plus the
// per-step latent divergence from the reference.
#include "attest/e2e/study.hpp"

#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <sstream>

#include <nlohmann/json.hpp>

#include "attest/core/report/svg.hpp"
#include "attest/core/report/table.hpp"
#include "attest/core/status.hpp"
#include "attest/e2e/synth_io.hpp"

namespace attest::e2e {
namespace {

namespace fs = std::filesystem;
namespace svg = report::svg;

// File-name form of a label: [A-Za-z0-9._-] kept, everything else '_'.
std::string slug(const std::string& s) {
  std::string o;
  for (char c : s) o += (std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '.' || c == '-' || c == '_') ? c : '_';
  return o.substr(0, 80);
}

std::string read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

struct WorkDir {
  explicit WorkDir(const fs::path& parent) : path(parent / (".study-work-" + std::to_string(::getpid()))) {
    std::error_code ec;
    fs::remove_all(path, ec);
    fs::create_directories(path, ec);
    if (ec) throw Error(path.string() + ": cannot create work directory: " + ec.message());
  }
  ~WorkDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  WorkDir(const WorkDir&) = delete;
  WorkDir& operator=(const WorkDir&) = delete;
  fs::path path;
};

std::string fmt_g(double v, const char* f = "%.3g") {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

std::string run_file(std::size_t i, const RunSpec& s) { return std::to_string(i) + "-" + slug(s.label); }

}  // namespace

CompareOptions study_compare_defaults() {
  CompareOptions o;
  o.margins.psnr_db = 3.0;
  o.margins.snr_db = 3.0;
  return o;
}

StudyReport run_study(StudyRuns runs, const fs::path& dir, const CompareOptions& opt, OutputFiles& out,
                      const std::function<void(const std::string&)>& log) {
  if (runs.specs.size() < 3) throw Error("e2e study: needs at least one kernel under test (--kernels)");
  std::error_code ec;
  fs::create_directories(dir, ec);
  fs::create_directories(dir / "runs", ec);
  if (ec || !fs::is_directory(dir)) throw Error(dir.string() + ": cannot create output directory");
  StudyReport r;
  // Per-step divergence of every run's latents from the reference's.
  for (std::size_t i = 0; i < runs.specs.size(); ++i)
    r.divergence.push_back(latent_divergence(runs.cfg, runs.results[i].latents, runs.results[0].latents, runs.results[0].step_t));
  r.floor_degenerate = r.divergence[1].back().mismatches == 0;

  // Encode every run into the work directory, compare, then stage the files for `dir`.
  WorkDir work(dir);
  {
    OutputFiles enc;
    for (std::size_t i = 0; i < runs.specs.size(); ++i) {
      const std::string base = run_file(i, runs.specs[i]);
      stage_video(enc, work.path / (base + ".mkv"), runs.cfg, runs.results[i]);
      stage_audio(enc, work.path / (base + ".wav"), runs.results[i]);
    }
    enc.commit();
  }
  if (log) log("encoded " + std::to_string(runs.specs.size()) + " runs (FFV1 .mkv, float WAV)");
  CompareInputs in;
  for (std::size_t i = 0; i < runs.specs.size(); ++i) {
    const std::string base = run_file(i, runs.specs[i]);
    RunInput ri{runs.specs[i].label, work.path / (base + ".mkv"), work.path / (base + ".wav")};
    if (i == 0)
      in.reference = ri;
    else if (i == 1)
      in.floor = ri;
    else
      in.tests.push_back(ri);
  }
  r.compare = compare(in, opt);
  if (log) log("compared");
  for (std::size_t i = 0; i < runs.specs.size(); ++i) {
    const std::string base = run_file(i, runs.specs[i]);
    for (const char* ext : {".mkv", ".wav"}) out.stage(dir / "runs" / (base + ext), read_bytes(work.path / (base + ext)));
  }
  r.runs = std::move(runs);
  const std::string svg = divergence_svg(r);
  out.stage(dir / "divergence.svg", svg);
  std::string extra = "<h2>Per-step latent divergence from the reference</h2>\n" + svg +
                      "\n<pre>\n" + study_markdown(r) + "</pre>\n";
  write_outputs(r.compare, {.json = {}, .markdown = {}, .html = dir / "study.html", .strip = dir / "strip.png"}, out, extra);
  out.stage(dir / "study.md", study_markdown(r) + "\n" + to_markdown(r.compare));
  out.stage(dir / "study.json", study_json(r).dump(2) + "\n");
  return r;
}

int study_exit_code(const StudyReport& r) { return (r.floor_degenerate || any_outside_floor(r.compare)) ? 1 : 0; }

// Log-scale line plot of latent rel-L2 per step (steps >= 1; step 0 is the shared noise).
// compare's svg_line_plot is linear and labels x as frames; the divergence spans decades.
std::string divergence_svg(const StudyReport& r) {
  const std::size_t steps = r.divergence[0].size() - 1;
  std::vector<std::vector<double>> series(r.divergence.size());
  svg::Extent e;
  for (std::size_t i = 1; i < r.divergence.size(); ++i)
    for (std::size_t s = 1; s <= steps; ++s) {
      series[i].push_back(r.divergence[i][s].rel_l2);
      e.add_positive(series[i].back());
    }
  // Every run identical to the reference: one decade at 1e-8, every line on the bottom edge.
  svg::Chart c(svg::Style::inline_attrs, svg::Coords::sig6, 960, 320, {70, 330, 30, 40}, svg::Axis::log10(e, 1e-8), steps);
  c.open("latent rel-L2 vs the reference per Euler step (log scale; 0 drawn at the bottom)", 18).frame().y_ticks(true).x_ticks(1).x_label("step", 6);
  for (std::size_t i = 1; i < r.divergence.size(); ++i) {
    const auto colour = svg::kRuns10[(i - 1) % svg::kRuns10.size()];
    // The floor run (i = 1) dashed and heavier: the spread every other run is judged against.
    c.line(series[i], colour, i == 1 ? 2.5 : 1.5, i == 1).legend(i - 1, r.runs.specs[i].label.substr(0, 48), colour, {8, 12, 15});
  }
  return c.finish();
}

std::string study_markdown(const StudyReport& r) {
  const auto& c = r.runs.cfg;
  std::ostringstream o;
  o << "## e2e study (synthetic pipeline)\n\n";
  o << "Config: " << c.frames << " frames " << c.width << "x" << c.height << ", " << c.steps << " steps, seed " << c.seed
    << ", weights seed " << c.weights_seed << ", " << c.blocks << " blocks, width " << c.dim << ", " << c.tokens() << " tokens ("
    << c.video_tokens() << " video, " << c.audio_tokens() << " audio), attention `" << to_string(c.attention_problem()) << "`; host "
    << r.runs.host << ".\n\n";
  if (r.floor_degenerate)
    o << "**Floor degenerate**: the floor run is bit-identical to the reference (the reference kernel's summation order does not "
         "reach its output bits), so there is no spread to judge against. Use an FP32 reference such as cpu.tiled.f32:f32.\n\n";
  const auto& fl = r.divergence[1];
  const std::size_t last = fl.size() - 1, mid = last / 2;
  report::Table t({{"run"}, {"kernel"}, {"recipe"}, {"latent rel-L2 step 1"}, {"step " + std::to_string(mid)},
                   {"step " + std::to_string(last) + " (final)"}, {"final / floor"}, {"seconds (attention)"}});
  for (std::size_t i = 0; i < r.runs.specs.size(); ++i) {
    const auto& s = r.runs.specs[i];
    const auto& d = r.divergence[i];
    const double ratio = fl[last].rel_l2 > 0 ? d[last].rel_l2 / fl[last].rel_l2 : 0.0;
    t.add({s.label, s.kernel + (s.reverse_kv ? " (K/V reversed)" : ""), s.recipe, d.size() > 1 ? fmt_g(d[1].rel_l2) : "-",
           fmt_g(d[mid].rel_l2), fmt_g(d[last].rel_l2), i == 0 ? "-" : fmt_g(ratio, "%.2f"),
           fmt_g(r.runs.results[i].total_seconds, "%.2f") + " (" + fmt_g(r.runs.results[i].attention_seconds, "%.2f") + ")"});
  }
  o << t.markdown();
  o << "\nPlot: divergence.svg (every step). Frames: strip.png. Runs: runs/*.mkv (FFV1), runs/*.wav.\n";
  return o.str();
}

nlohmann::json study_json(const StudyReport& r) {
  const auto& c = r.runs.cfg;
  nlohmann::json j{{"config", {{"frames", c.frames}, {"width", c.width}, {"height", c.height}, {"steps", c.steps}, {"seed", c.seed},
                               {"weights_seed", c.weights_seed}, {"dim", c.dim}, {"heads", c.heads}, {"blocks", c.blocks},
                               {"mlp", c.mlp}, {"tokens", c.tokens()}, {"attention_problem", to_string(c.attention_problem())}}},
                   {"host", r.runs.host},
                   {"floor_degenerate", r.floor_degenerate},
                   {"exit_code", study_exit_code(r)}};
  nlohmann::json runs = nlohmann::json::array();
  for (std::size_t i = 0; i < r.runs.specs.size(); ++i) {
    const auto& s = r.runs.specs[i];
    const auto& res = r.runs.results[i];
    nlohmann::json steps = nlohmann::json::array();
    for (const auto& d : r.divergence[i])
      steps.push_back({{"step", d.step}, {"t", d.t}, {"rel_l2", d.rel_l2}, {"max_abs", d.max_abs}, {"video_rel_l2", d.video_rel_l2},
                       {"audio_rel_l2", d.audio_rel_l2}, {"mismatches", d.mismatches}});
    const std::string base = run_file(i, s);
    nlohmann::json run{{"label", s.label}, {"kernel", s.kernel}, {"recipe", s.recipe}, {"reverse_kv", s.reverse_kv},
                       {"video", "runs/" + base + ".mkv"}, {"audio", "runs/" + base + ".wav"},
                       {"total_seconds", res.total_seconds}, {"attention_seconds", res.attention_seconds},
                       {"attention_calls", res.attention_calls}, {"divergence", steps}};
    for (const auto& rr : r.compare.runs)
      if (rr.label == s.label) run["verdict"] = std::string(verdict_name(rr.verdict));
    runs.push_back(run);
  }
  j["runs"] = runs;
  j["compare"] = to_json(r.compare);
  return j;
}

}  // namespace attest::e2e
