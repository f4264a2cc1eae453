// Study runs (synth.hpp): the run list, in-process execution, and the portable npy + JSON form
// that carries runs from a device host (which has no OpenCV) back to `attest e2e study --import`.
#include <unistd.h>

#include <cstdio>
#include <fstream>

#include <nlohmann/json.hpp>

#include "attest/core/status.hpp"
#include "attest/core/tensor.hpp"
#include "attest/datasets/npy.hpp"
#include "attest/e2e/synth.hpp"
#include "attest/kernels/kernel.hpp"

namespace attest::e2e {
namespace {

namespace fs = std::filesystem;

RunSpec parse_item(const std::string& item, const char* what) {
  // "kernel:recipe" splits at the first ':' (kernel names have none; a full recipe string may).
  const auto colon = item.find(':');
  const std::string k = item.substr(0, colon), r = colon == std::string::npos ? "" : item.substr(colon + 1);
  if (k.empty()) throw Error(std::string(what) + " '" + item + "': expected KERNEL[:RECIPE]");
  const auto kc = choose_kernel(k, r);
  return {kc.kernel->name() + ":" + kc.recipe_label, kc.kernel->name(), kc.recipe_label, false};
}

std::string host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  return buf;
}

nlohmann::json cfg_json(const SynthConfig& c) {
  return {{"frames", c.frames}, {"width", c.width}, {"height", c.height}, {"steps", c.steps}, {"seed", c.seed},
          {"weights_seed", c.weights_seed}, {"dim", c.dim}, {"heads", c.heads}, {"blocks", c.blocks}, {"mlp", c.mlp}};
}

}  // namespace

std::vector<RunSpec> study_runs(const std::string& reference, const std::vector<std::string>& kernels) {
  std::vector<RunSpec> v;
  RunSpec ref = parse_item(reference, "--reference");
  ref.label = "reference";
  v.push_back(ref);
  RunSpec floor = ref;
  floor.label = "floor";
  floor.reverse_kv = true;
  v.push_back(floor);
  for (const auto& k : kernels) {
    RunSpec s = parse_item(k, "--kernels");
    for (const auto& have : v)
      if (have.label == s.label) throw Error("--kernels: '" + k + "' is listed twice");
    v.push_back(s);
  }
  return v;
}

StudyRuns execute_runs(const SynthConfig& cfg, const std::vector<RunSpec>& specs, const std::function<void(const std::string&)>& log) {
  StudyRuns r;
  r.cfg = cfg;
  r.specs = specs;
  r.host = host_name();
  // Every kernel must accept the attention problem before anything runs.
  for (const auto& s : specs) {
    const auto kc = choose_kernel(s.kernel, s.recipe);
    if (auto st = kc.kernel->supports(cfg.attention_problem(), kc.recipe); !st)
      throw Error("kernel " + s.kernel + " refuses recipe " + s.recipe + " on " + to_string(cfg.attention_problem()) + ": " + st.reason());
  }
  for (const auto& s : specs) {
    const auto kc = choose_kernel(s.kernel, s.recipe);
    SynthConfig c = cfg;
    c.reverse_kv = s.reverse_kv;
    r.results.push_back(run_synth(c, *kc.kernel, kc.recipe));
    if (log) {
      char line[512];
      std::snprintf(line, sizeof line, "%-10s %s %s%s: %.2f s (attention %.2f s)", s.label == "reference" || s.label == "floor" ? s.label.c_str() : "test",
                    s.kernel.c_str(), s.recipe.c_str(), s.reverse_kv ? " reverse-kv" : "", r.results.back().total_seconds,
                    r.results.back().attention_seconds);
      log(line);
    }
  }
  return r;
}

void write_runs(OutputFiles& out, const fs::path& dir, const StudyRuns& runs) {
  nlohmann::json m{{"format", "attest-synth-runs/1"}, {"config", cfg_json(runs.cfg)}, {"host", runs.host}};
  nlohmann::json list = nlohmann::json::array();
  for (std::size_t i = 0; i < runs.specs.size(); ++i) {
    const auto& s = runs.specs[i];
    const auto& res = runs.results[i];
    const std::string base = std::to_string(i);
    Tensor fr(DType::u8, {runs.cfg.frames, runs.cfg.height, runs.cfg.width, 3});
    std::copy(res.frames.begin(), res.frames.end(), fr.data<std::uint8_t>());
    Tensor au(DType::f32, {static_cast<std::int64_t>(res.audio.size())});
    std::copy(res.audio.begin(), res.audio.end(), au.data<float>());
    Tensor la(DType::f32, {static_cast<std::int64_t>(res.step_t.size()), runs.cfg.tokens(), SynthArch::kChannels});
    std::copy(res.latents.begin(), res.latents.end(), la.data<float>());
    datasets::write_npy(out, dir / (base + ".frames.npy"), fr);
    datasets::write_npy(out, dir / (base + ".audio.npy"), au);
    datasets::write_npy(out, dir / (base + ".latents.npy"), la);
    list.push_back({{"label", s.label}, {"kernel", s.kernel}, {"recipe", s.recipe}, {"reverse_kv", s.reverse_kv},
                    {"files", base}, {"step_t", res.step_t}, {"attention_calls", res.attention_calls},
                    {"attention_seconds", res.attention_seconds}, {"total_seconds", res.total_seconds}});
  }
  m["runs"] = list;
  out.stage(dir / "manifest.json", m.dump(2) + "\n");
}

StudyRuns read_runs(const fs::path& dir) {
  const fs::path mf = dir / "manifest.json";
  std::ifstream in(mf);
  if (!in) throw Error(mf.string() + ": cannot open");
  StudyRuns r;
  try {
    const auto m = nlohmann::json::parse(in);
    if (m.at("format") != "attest-synth-runs/1") throw Error(mf.string() + ": format is not attest-synth-runs/1");
    const auto& c = m.at("config");
    r.cfg.frames = c.at("frames");
    r.cfg.width = c.at("width");
    r.cfg.height = c.at("height");
    r.cfg.steps = c.at("steps");
    r.cfg.seed = c.at("seed");
    r.cfg.weights_seed = c.at("weights_seed");
    r.cfg.dim = c.at("dim");
    r.cfg.heads = c.at("heads");
    r.cfg.blocks = c.at("blocks");
    r.cfg.mlp = c.at("mlp");
    r.host = m.value("host", "unknown");
    if (auto st = r.cfg.validate(); !st) throw Error(mf.string() + ": config: " + st.reason());
    for (const auto& j : m.at("runs")) {
      RunSpec s{j.at("label"), j.at("kernel"), j.at("recipe"), j.at("reverse_kv")};
      SynthResult res;
      res.step_t = j.at("step_t").get<std::vector<double>>();
      res.attention_calls = j.value("attention_calls", 0);
      res.attention_seconds = j.value("attention_seconds", 0.0);
      res.total_seconds = j.value("total_seconds", 0.0);
      const std::string base = j.at("files");
      const auto load = [&](const std::string& suffix, DType dt, const Shape& shape) {
        const fs::path p = dir / (base + suffix);
        const Tensor t = datasets::read_npy(p);
        if (t.dtype() != dt || t.shape() != shape)
          throw Error(p.string() + ": " + std::string(dtype_name(t.dtype())) + " " + shape_string(t.shape()) + ", expected " +
                      std::string(dtype_name(dt)) + " " + shape_string(shape));
        return t.contiguous();
      };
      const Tensor fr = load(".frames.npy", DType::u8, {r.cfg.frames, r.cfg.height, r.cfg.width, 3});
      res.frames.assign(fr.data<std::uint8_t>(), fr.data<std::uint8_t>() + fr.numel());
      const Tensor au = load(".audio.npy", DType::f32, {r.cfg.audio_samples()});
      res.audio.assign(au.data<float>(), au.data<float>() + au.numel());
      const Tensor la = load(".latents.npy", DType::f32, {static_cast<std::int64_t>(res.step_t.size()), r.cfg.tokens(), SynthArch::kChannels});
      res.latents.assign(la.data<float>(), la.data<float>() + la.numel());
      r.specs.push_back(s);
      r.results.push_back(std::move(res));
    }
  } catch (const nlohmann::json::exception& e) {
    throw Error(mf.string() + ": " + e.what());
  }
  if (r.specs.size() < 2 || r.specs[0].label != "reference" || r.specs[1].label != "floor")
    throw Error(mf.string() + ": the first two runs must be 'reference' and 'floor'");
  return r;
}

}  // namespace attest::e2e
