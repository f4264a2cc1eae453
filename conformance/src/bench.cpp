#include "attest/conformance/bench.hpp"

#include <fnmatch.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>
#include <utility>

#include <fmt/format.h>

#include "attest/conformance/gate.hpp"
#include "attest/core/problem.hpp"
#include "attest/core/report/table.hpp"
#include "attest/core/recipe.hpp"
#include "attest/core/status.hpp"
#include "attest/datasets/distributions.hpp"
#include "attest/kernels/device_entry.hpp"
#include "attest/kernels/kernel.hpp"
#include "attest/reference/quantize.hpp"
#include "bench_shapes.hpp"

#if defined(ATTEST_BENCH_GPU)
#include "attest/kernels/gpu/device.hpp"
#endif

namespace attest::conformance {

namespace {

using Clock = std::chrono::steady_clock;

bool glob(const std::string& pattern, const std::string& s) { return ::fnmatch(pattern.c_str(), s.c_str(), 0) == 0; }

std::string trim(std::string s) {
  const auto b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return {};
  const auto e = s.find_last_not_of(" \t\r");
  return s.substr(b, e - b + 1);
}

/// An independent copy of a tensor's whole buffer (views keep their byte positions).
Tensor deep_copy(const Tensor& t) {
  Tensor c(t.dtype(), t.shape());
  const auto src = t.storage();
  if (c.storage().size() != src.size()) return t.contiguous();
  std::memcpy(c.storage().data(), src.data(), src.size());
  return c;
}

std::size_t tensor_bytes(const Tensor& t) {
  return t.numel() <= 0 ? 0 : static_cast<std::size_t>(t.numel()) * dtype_size(t.dtype());
}

/// The element format of a quantizer scheme: its first ':'-separated token ("int8", "bf16", "mxfp4_e2m1fn").
std::string scheme_format(const Scheme& scheme) { return scheme_head(scheme); }

bool is_plain_cast(const Scheme& scheme) {
  return scheme.family == Scheme::Family::cast || scheme.family == Scheme::Family::identity;
}

nlohmann::json stats_json(const std::vector<double>& samples_ms) {
  const SampleStats s = sample_stats(samples_ms);
  nlohmann::json j;
  j["samples_ms"] = samples_ms;
  j["median_ms"] = s.median;
  j["min_ms"] = s.min;
  j["max_ms"] = s.max;
  j["q1_ms"] = s.q1;
  j["q3_ms"] = s.q3;
  j["spread"] = s.spread();
  return j;
}

/// `warmup` calls, then `repeat` samples of k back-to-back calls each (k chosen from the warm-up
/// so a sample lasts >= min_sample_ms); call(i) runs on input copy i. `start()` and `stop_ms()`
/// are the clock around a sample.
template <class Start, class StopMs>
std::vector<double> time_calls(const std::function<void(int)>& call, int copies, const BenchOptions& o, int& calls_per_sample,
                               Start&& start, StopMs&& stop_ms) {
  int next = 0;
  auto one = [&] {
    call(next);
    next = (next + 1) % copies;
  };
  double warm_ms = 0;
  for (int i = 0; i < std::max(1, o.warmup); ++i) {
    start();
    one();
    warm_ms = stop_ms();
  }
  calls_per_sample = warm_ms >= o.min_sample_ms ? 1 : static_cast<int>(std::min(10000.0, std::ceil(o.min_sample_ms / std::max(warm_ms, 1e-4))));
  std::vector<double> out;
  for (int r = 0; r < o.repeat; ++r) {
    start();
    for (int c = 0; c < calls_per_sample; ++c) one();
    out.push_back(stop_ms() / calls_per_sample);
  }
  return out;
}

/// Host timing: the steady clock around each sample.
std::vector<double> time_host(const std::function<void(int)>& call, int copies, const BenchOptions& o, int& calls_per_sample) {
  Clock::time_point t0;
  return time_calls(
      call, copies, o, calls_per_sample, [&] { t0 = Clock::now(); },
      [&] { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); });
}

#if defined(ATTEST_BENCH_GPU)
/// Device timing: events on the default stream around each sample.
std::vector<double> time_device(const std::function<void(int)>& launch, int copies, const BenchOptions& o, int& calls_per_sample) {
  gpu::EventTimer timer;
  return time_calls(launch, copies, o, calls_per_sample, [&] { timer.start(); }, [&] { return timer.stop_ms(); });
}

/// A kernel's device side (Kernel::device()) on device-resident buffers: `copies` copies of the
/// inputs (rotated past the device caches), one output, LSE, cu_seqlens and workspace, uploaded
/// once; launch(i) enqueues one forward pass on copy i on the default stream, with no host copy
/// and no synchronisation, so the events around it time the kernel alone.
class DeviceRun {
 public:
  DeviceRun(const kernels::DeviceEntry& e, const Problem& p, const Recipe& r, const datasets::Qkv& in, bool lse, int copies)
      : e_(e), p_(p), r_(r) {
    for (const Tensor* t : {&in.q, &in.k, &in.v})
      if (t->dtype() != DType::f32 || t->strides() != contiguous_strides(t->shape()))
        throw Error("bench: a device side takes contiguous f32 inputs");
    auto upload = [](const Tensor& t) {
      gpu::DeviceBuffer b(t.storage().size());
      b.upload(t.storage().data(), t.storage().size());
      return b;
    };
    for (int c = 0; c < copies; ++c) {
      q_.push_back(upload(in.q));
      k_.push_back(upload(in.k));
      v_.push_back(upload(in.v));
    }
    const bool rg = p.ragged();
    const std::int64_t bq = rg ? 1 : p.batch, tq = rg ? p.cu_seqlens_q.back() : p.seqlen_q;
    out_ = gpu::DeviceBuffer(static_cast<std::size_t>(bq * tq * p.heads_q * p.head_dim_v) * 4);
    if (lse) lse_ = gpu::DeviceBuffer(static_cast<std::size_t>(bq * p.heads_q * tq) * 4);
    if (rg) {
      std::vector<std::int64_t> host(p.cu_seqlens_q);
      host.insert(host.end(), p.cu_seqlens_kv.begin(), p.cu_seqlens_kv.end());
      cu_ = gpu::DeviceBuffer(host.size() * sizeof(std::int64_t));
      cu_.upload(host.data(), cu_.bytes());
    }
    if (const std::size_t ws = e.workspace_bytes(p, r); ws > 0) ws_ = gpu::DeviceBuffer(ws);
  }
  void launch(int i) const {
    const auto c = static_cast<std::size_t>(i);
    kernels::DeviceIo io;
    io.q = q_[c].as<const float>();
    io.k = k_[c].as<const float>();
    io.v = v_[c].as<const float>();
    io.out = out_.as<float>();
    io.lse = lse_.as<float>();
    if (cu_.data() != nullptr) {
      io.cu_q = cu_.as<const std::int64_t>();
      io.cu_kv = io.cu_q + p_.cu_seqlens_q.size();
    }
    io.workspace = ws_.data();
    e_.enqueue(p_, r_, io, nullptr);
  }
  /// Waits for the launches and copies the output of the last one into `out` (host f32, the
  /// contiguous [B,S,H,Dv] of kernels::Args).
  void download(const Tensor& out) const {
    gpu::synchronize();
    if (out.dtype() != DType::f32 || out.storage().size() != out_.bytes()) throw Error("bench: device output of another shape");
    out_.download(out.storage().data(), out_.bytes());
  }

 private:
  const kernels::DeviceEntry& e_;
  Problem p_;
  Recipe r_;
  std::vector<gpu::DeviceBuffer> q_, k_, v_;
  gpu::DeviceBuffer out_, lse_, cu_, ws_;
};
#endif

/// Largest cache size in sysfs (bytes), 0 when unreadable.
std::size_t largest_cache_bytes() {
  std::size_t best = 0;
  for (int i = 0; i < 8; ++i) {
    std::ifstream in("/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/size");
    if (!in) continue;
    std::string s;
    in >> s;
    if (s.empty()) continue;
    std::size_t mult = 1;
    if (s.back() == 'K') mult = 1024, s.pop_back();
    else if (s.back() == 'M') mult = 1024 * 1024, s.pop_back();
    try {
      best = std::max(best, static_cast<std::size_t>(std::stoull(s)) * mult);
    } catch (const std::exception&) {
    }
  }
  return best;
}

}  // namespace

// ---- shapes ----

std::vector<ModelShape> parse_shapes(const std::string& text, const std::string& origin) {
  std::vector<ModelShape> out;
  std::istringstream in(text);
  int n = 0;
  for (std::string line; std::getline(in, line);) {
    ++n;
    if (auto h = line.find('#'); h != std::string::npos) line.resize(h);
    line = trim(line);
    if (line.empty()) continue;
    std::istringstream f(line);
    ModelShape s;
    std::string extra;
    f >> s.name >> s.problem >> extra;
    if (s.problem.empty() || !extra.empty())
      throw Error(fmt::format("{}:{}: expected '<name> <problem>', got '{}'", origin, n, line));
    try {
      const Problem p = parse_problem(s.problem);
      if (auto st = p.validate(); !st) throw Error(st.reason());
    } catch (const Error& e) {
      throw Error(fmt::format("{}:{}: shape '{}': {}", origin, n, s.name, e.what()));
    }
    for (const auto& o : out)
      if (o.name == s.name) throw Error(fmt::format("{}:{}: shape '{}' is listed twice", origin, n, s.name));
    out.push_back(std::move(s));
  }
  if (out.empty()) throw Error(origin + ": no shapes");
  return out;
}

std::vector<std::string> builtin_shape_sets() {
  std::vector<std::string> v;
  for (const auto& [k, _] : bench_shapes::files()) v.emplace_back(k);
  v.emplace_back("dit");
  return v;
}

std::vector<ModelShape> load_shapes(const std::string& name_or_path) {
  if (name_or_path == "dit") {
    // Every model set: the built-in sets other than the small CPU ones, which datasets/shapes
    // names cpu-*.shapes (a shape-set naming rule; no kernel is involved).
    std::vector<ModelShape> all;
    for (const auto& [k, text] : bench_shapes::files()) {
      if (k.rfind("cpu", 0) == 0) continue;
      auto v = parse_shapes(std::string(text), "shapes/" + std::string(k) + ".shapes");
      all.insert(all.end(), v.begin(), v.end());
    }
    return all;
  }
  for (const auto& [k, text] : bench_shapes::files())
    if (k == name_or_path) return parse_shapes(std::string(text), "shapes/" + name_or_path + ".shapes");
  std::ifstream in(name_or_path);
  if (!in) {
    std::string valid;
    for (const auto& s : builtin_shape_sets()) valid += (valid.empty() ? "" : ", ") + s;
    throw Error("shapes '" + name_or_path + "': no such file or built-in set (built-in: " + valid + ")");
  }
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_shapes(ss.str(), name_or_path);
}

// ---- statistics ----

SampleStats sample_stats(std::vector<double> v) {
  if (v.empty()) throw Error("sample_stats: no samples");
  std::sort(v.begin(), v.end());
  auto q = [&](double f) {
    const double pos = f * static_cast<double>(v.size() - 1);
    const auto lo = static_cast<std::size_t>(std::floor(pos));
    const auto hi = std::min(v.size() - 1, lo + 1);
    return v[lo] + (pos - static_cast<double>(lo)) * (v[hi] - v[lo]);
  };
  return {q(0.5), v.front(), v.back(), q(0.25), q(0.75)};
}

std::size_t host_rotation_bytes() {
  const std::size_t c = largest_cache_bytes();
  return 2 * (c ? c : std::size_t{32} << 20);
}

int rotation_copies(std::size_t set_bytes, std::size_t target) {
  if (set_bytes == 0) return 1;
  const std::size_t n = target / set_bytes + 1;
  return static_cast<int>(std::clamp<std::size_t>(n, 1, 64));
}

// ---- the benchmark ----

namespace {

struct BenchJob {
  kernels::Kernel* k;
  std::string recipe;
  const ModelShape* shape;
};

// The kernels --kernel selects, in registry order (mutants only when the glob selects them).
std::vector<kernels::Kernel*> selected_kernels(const BenchOptions& o) {
  const auto& reg = kernels::Registry::instance();
  const bool mutants = reg.selects_planted_bugs(o.kernel);
  std::vector<kernels::Kernel*> ks;
  for (const auto& k : reg.all()) {
    const bool is_mutant = k->capabilities().planted_bug;
    if (is_mutant && !mutants) continue;
    if (!o.kernel.empty() && !glob(o.kernel, k->name())) continue;
    ks.push_back(k.get());
  }
  if (ks.empty()) {
    std::string valid;
    for (const auto& k : kernels::Registry::instance().all()) valid += (valid.empty() ? "" : " ") + k->name();
    throw Error("bench: --kernel '" + o.kernel + "' matches no registered kernel (registered: " + valid + ")");
  }
  return ks;
}

// Every selected (shape, kernel, recipe), shapes outermost.
std::vector<BenchJob> bench_jobs(const BenchOptions& o) {
  const std::vector<kernels::Kernel*> ks = selected_kernels(o);
  std::vector<BenchJob> jobs;
  for (const auto& s : o.shapes)
    for (auto* k : ks)
      for (const auto& r : k->recipes())
        if (o.recipe.empty() || glob(o.recipe, r)) jobs.push_back({k, r, &s});
  if (jobs.empty()) throw Error("bench: --recipe '" + o.recipe + "' matches no recipe of the selected kernels");
  return jobs;
}

nlohmann::json bench_meta(const BenchOptions& o) {
  nlohmann::json meta = suite_info();
  meta["omp_threads"] = omp_get_max_threads();
  meta["host_rotation_bytes"] = host_rotation_bytes();
  meta["device_rotation_bytes"] = kDeviceRotationBytes;
  meta["repeat"] = o.repeat;
  meta["warmup"] = o.warmup;
  meta["min_sample_ms"] = o.min_sample_ms;
  meta["dist"] = o.dist;
  meta["seed"] = o.seed;
  meta["selection"] = {{"kernel", o.kernel}, {"recipe", o.recipe}};
  meta["with_preprocessing"] = o.with_preprocessing;
  return meta;
}

// An attention row's descriptor: the case, the kernel and its operand formats, the FLOPs of a call.
nlohmann::json attention_row(const BenchJob& job, const Problem& p, const Recipe& rc) {
  nlohmann::json row;
  row["case"] = fmt::format("kernel={} recipe={} problem={}", job.k->name(), job.recipe, job.shape->problem);
  row["type"] = "attention";
  row["kernel"] = job.k->name();
  row["backend"] = job.k->backend();
  row["recipe"] = job.recipe;
  row["problem"] = job.shape->problem;
  row["shape"] = job.shape->name;
  row["qk"] = scheme_format(rc.q) == scheme_format(rc.k) ? scheme_format(rc.q) : scheme_format(rc.q) + "/" + scheme_format(rc.k);
  row["v"] = scheme_format(rc.v);
  row["p"] = std::string(name(rc.p));
  row["o"] = std::string(name(rc.out));
  row["flops"] = p.flops();
  return row;
}

// Why a case is not timed, as a row's status and reason ("skipped", "unsupported", "not timed"),
// or nothing: decided before any input is generated.
std::optional<std::pair<std::string, std::string>> why_not_timed(const BenchJob& job, const Problem& p,
                                                                 const Recipe& rc, const BenchOptions& o) {
  const double flops = p.flops();
  if (o.max_gflop > 0 && flops > o.max_gflop * 1e9)
    return std::pair{"skipped", fmt::format("{:.1f} GFLOP per call exceeds --max-gflop {}", flops * 1e-9, o.max_gflop)};
  if (p.layout != Layout::bshd) return std::pair{"skipped", "bench times the bshd layout only"};
  if (auto st = job.k->supports(p, rc); !st) return std::pair{"unsupported", st.reason()};
  if (job.k->backend() != "cpu" && job.k->device() == nullptr)
    return std::pair{"not timed", "device kernel without a device side (Kernel::device(); its run() includes host<->device copies)"};
  return std::nullopt;
}

// Times one attention case into row: `copies` copies of the inputs rotated past the caches; a CPU
// kernel's run() under the steady clock, a device side's launches under events (its output then
// compared bitwise with run()'s).
void time_attention(const BenchJob& job, const Problem& p, const Recipe& rc, const datasets::Qkv& qkv,
                    const BenchOptions& o, nlohmann::json& row) {
  const bool host = job.k->backend() == "cpu";
  const std::size_t set_bytes = tensor_bytes(qkv.q) + tensor_bytes(qkv.k) + tensor_bytes(qkv.v);
  const std::size_t target = host ? host_rotation_bytes() : kDeviceRotationBytes;
  const int copies = rotation_copies(set_bytes, target);
  const bool rg = p.ragged();
  const std::int64_t bq = rg ? 1 : p.batch, tq = rg ? p.cu_seqlens_q.back() : p.seqlen_q;
  Tensor out(DType::f32, {bq, tq, p.heads_q, p.head_dim_v});
  Tensor lse(DType::f32, {bq, p.heads_q, tq});
  const Tensor* lse_arg = job.k->capabilities().lse ? &lse : nullptr;
  row["buffers"] = copies;
  row["rotation_bytes"] = set_bytes * static_cast<std::size_t>(copies);
  int per_sample = 1;
  std::vector<double> samples;
  if (host) {
    std::vector<datasets::Qkv> sets;
    sets.push_back({qkv.q, qkv.k, qkv.v});
    for (int c = 1; c < copies; ++c) sets.push_back({deep_copy(qkv.q), deep_copy(qkv.k), deep_copy(qkv.v)});
    samples = time_host(
        [&](int i) {
          const auto& s = sets[static_cast<std::size_t>(i)];
          job.k->run(kernels::Args{p, rc, s.q, s.k, s.v, out, lse_arg, ""});
        },
        copies, o, per_sample);
    row["timer"] = "host";
  } else {
#if defined(ATTEST_BENCH_GPU)
    const DeviceRun dr(*job.k->device(), p, rc, qkv, lse_arg != nullptr, copies);
    samples = time_device([&](int i) { dr.launch(i); }, copies, o, per_sample);
    row["timer"] = "device";
    // A timed kernel must compute what run() computes: compare the device output bitwise.
    Tensor ref_out(DType::f32, out.shape());
    job.k->run(kernels::Args{p, rc, qkv.q, qkv.k, qkv.v, ref_out, lse_arg, ""});
    dr.download(out);
    row["output_matches_run"] = std::memcmp(out.storage().data(), ref_out.storage().data(), out.storage().size()) == 0;
    if (o.graph) row["graph"] = {{"status", "not timed"}, {"reason", "graph replay timing is not implemented for device sides yet"}};
#else
    throw Error("device kernel in a build without a GPU backend");
#endif
  }
  row.update(stats_json(samples));
  row["calls_per_sample"] = per_sample;
  row["repeat"] = o.repeat;
  row["tflops"] = p.flops() / (row["median_ms"].get<double>() * 1e-3) * 1e-12;
  row["status"] = "timed";
}

// The recipe's Q/K/V quantizers (preprocessing a kernel like SageAttention runs before
// attention), timed with the reference quantizers: the suite has no quantizer kernels of its
// own, so these rows measure the CPU model of that step. One row per quantizer case not in
// `seen` (operand, scheme, problem), appended to rows.
void time_quantizers(const BenchJob& job, const Problem& p, const Recipe& rc, const datasets::Qkv& qkv,
                     const BenchOptions& o, std::vector<std::string>& seen, nlohmann::json& rows) {
  const Tensor* inputs[3] = {&qkv.q, &qkv.k, &qkv.v};
  const Scheme schemes[3] = {rc.q, rc.k, rc.v};
  const char* roles[3] = {"q", "k", "v"};
  for (int r = 0; r < 3; ++r) {
    if (is_plain_cast(schemes[r])) continue;
    const std::string qcase = fmt::format("quantize operand={} scheme={} problem={}", roles[r], to_string(schemes[r]), job.shape->problem);
    if (std::find(seen.begin(), seen.end(), qcase) != seen.end()) continue;
    seen.push_back(qcase);
    nlohmann::json qrow;
    qrow["case"] = qcase;
    qrow["type"] = "quantizer";
    qrow["kernel"] = "ref.quantize";
    qrow["backend"] = "cpu";
    qrow["operand"] = roles[r];
    qrow["scheme"] = to_string(schemes[r]);
    qrow["recipe"] = job.recipe;
    qrow["problem"] = job.shape->problem;
    qrow["shape"] = job.shape->name;
    try {
      const Scheme& qs = schemes[r];
      ref::require_quantizer(qs);
      ref::QuantInputs qin;
      qin.sm_scale = p.scale();
      const Tensor x = inputs[r]->permute({0, 2, 1, 3});  // [B, H, T, C]: slabs of tokens x channels
      const auto probe = ref::quantize(x, qs, qin);
      const std::size_t bytes =
          tensor_bytes(*inputs[r]) + tensor_bytes(probe.codes) + tensor_bytes(probe.scales) + tensor_bytes(probe.mean);
      int qps = 1;
      const auto qs_ms = time_host([&](int) { (void)ref::quantize(x, qs, qin); }, 1, o, qps);
      qrow.update(stats_json(qs_ms));
      qrow["calls_per_sample"] = qps;
      qrow["repeat"] = o.repeat;
      qrow["timer"] = "host";
      qrow["bytes"] = bytes;
      qrow["gbs"] = static_cast<double>(bytes) / (qrow["median_ms"].get<double>() * 1e-3) * 1e-9;
      qrow["status"] = "timed";
    } catch (const Error& e) {
      qrow["status"] = "unsupported";
      qrow["reason"] = e.what();
    }
    rows.push_back(std::move(qrow));
  }
}

// One job's attention row: not timed (and why), timed, or the error that stopped it. Its
// quantizer rows (--with-preprocessing) go to rows first.
nlohmann::json bench_case(const BenchJob& job, const BenchOptions& o, datasets::Distribution dist,
                          std::vector<std::string>& quantizer_cases, nlohmann::json& rows) {
  const Problem p = parse_problem(job.shape->problem);
  const Recipe rc = parse_recipe(job.recipe);
  nlohmann::json row = attention_row(job, p, rc);
  if (auto why = why_not_timed(job, p, rc, o)) {
    row["status"] = why->first;
    row["reason"] = why->second;
    return row;
  }
  try {
    const auto qkv = datasets::generate_qkv(p, dist, o.seed);
    time_attention(job, p, rc, qkv, o, row);
    if (o.with_preprocessing) time_quantizers(job, p, rc, qkv, o, quantizer_cases, rows);
  } catch (const Error& e) {
    row["status"] = "error";
    row["reason"] = e.what();
  }
  return row;
}

}  // namespace

nlohmann::json run_bench(const BenchOptions& o) {
  if (o.repeat < 1) throw Error("bench: --repeat must be >= 1");
  if (o.shapes.empty()) throw Error("bench: no shapes");
  const auto dist = datasets::parse_distribution(o.dist);
  const std::vector<BenchJob> jobs = bench_jobs(o);

  nlohmann::json rep;
  rep["kind"] = "bench";
  rep["meta"] = bench_meta(o);
  auto& rows = rep["results"] = nlohmann::json::array();
  const auto t_start = Clock::now();
  std::vector<std::string> quantizer_cases;  // quantizer rows written so far (each is timed once)
  std::size_t done = 0;
  for (const BenchJob& job : jobs) {
    ++done;
    nlohmann::json row = bench_case(job, o, dist, quantizer_cases, rows);
    rows.push_back(std::move(row));
    if (o.on_row) o.on_row(rows.back(), done, jobs.size());
  }
  rep["seconds"] = std::chrono::duration<double>(Clock::now() - t_start).count();
  return rep;
}

// ---- Markdown ----

namespace {
using ::attest::report::Align;
using ::attest::report::Cell;
using ::attest::report::Column;
using ::attest::report::Table;

// CPU kernels run at a few GFLOP/s: keep two significant digits there instead of printing 0.0000.
std::string fmt_tflops(double t) { return t >= 10 ? fmt::format("{:.0f}", t) : t >= 0.1 ? fmt::format("{:.2f}", t) : fmt::format("{:.2g}", t); }
}  // namespace

std::string bench_markdown(const nlohmann::json& rep) {
  const auto& rows = rep.at("results");
  const auto& m = rep.at("meta");
  auto str = [](const nlohmann::json& j, const char* k) { return j.contains(k) && j[k].is_string() ? j[k].get<std::string>() : std::string("?"); };
  std::string s = "## attest bench\n\n";
  s += fmt::format("Suite `{}`, device {}, {} OpenMP threads; median of {} samples (warm-up excluded), inputs rotated "
                   "over {} MiB (host) / {} MiB (device); spread = (q3 - q1) / median.\n\n",
                   str(m, "commit"), str(m, "device"), m.value("omp_threads", 0), m.value("repeat", 0),
                   m.value("host_rotation_bytes", std::size_t{0}) >> 20, m.value("device_rotation_bytes", std::size_t{0}) >> 20);
  // Per shape, the mha_v4 table: kernel, formats, TFLOP/s.
  std::vector<std::string> shapes;
  for (const auto& r : rows)
    if (std::find(shapes.begin(), shapes.end(), str(r, "shape")) == shapes.end()) shapes.push_back(str(r, "shape"));
  for (const auto& sh : shapes) {
    std::string problem;
    Table t({{"kernel"}, {"recipe"}, {"Q/K"}, {"V"}, {"O"}, {"TFLOP/s", Align::right}, {"median ms", Align::right}, {"spread", Align::right}});
    for (const auto& r : rows) {
      if (str(r, "shape") != sh || str(r, "type") != "attention") continue;
      problem = str(r, "problem");
      const bool timed = str(r, "status") == "timed";
      t.add({Cell::code(str(r, "kernel")), Cell::code(str(r, "recipe")), str(r, "qk"), str(r, "v"), str(r, "o"),
             timed ? fmt_tflops(r.at("tflops").get<double>()) : "—",
             timed ? fmt::format("{:.3f}", r.at("median_ms").get<double>()) : "—",
             timed ? fmt::format("{:.1f}%", 100 * r.at("spread").get<double>()) : str(r, "status") + ": " + str(r, "reason")});
    }
    if (t.empty()) continue;
    s += fmt::format("### {} (`{}`)\n\n", sh, problem) + t.markdown() + "\n";
  }
  // Per model shape: rows shapes, columns kernel/recipe, TFLOP/s.
  std::vector<std::string> cols;
  for (const auto& r : rows)
    if (str(r, "type") == "attention" && str(r, "status") == "timed") {
      const auto c = str(r, "kernel") + " " + str(r, "recipe");
      if (std::find(cols.begin(), cols.end(), c) == cols.end()) cols.push_back(c);
    }
  if (!cols.empty() && shapes.size() > 1) {
    std::vector<Column> columns = {{"shape"}, {"problem"}};
    for (const auto& c : cols) columns.push_back({Cell::code(c), Align::right});
    Table t(std::move(columns));
    for (const auto& sh : shapes) {
      std::string problem;
      std::vector<Cell> row = {sh, Cell::absent()};  // the problem cell is filled in below
      for (const auto& c : cols) {
        Cell cell = Cell::absent();
        for (const auto& r : rows)
          if (str(r, "shape") == sh && str(r, "type") == "attention" && str(r, "kernel") + " " + str(r, "recipe") == c) {
            problem = str(r, "problem");
            cell = str(r, "status") == "timed" ? fmt_tflops(r.at("tflops").get<double>()) : str(r, "status");
          }
        row.push_back(std::move(cell));
      }
      row[1] = Cell::code(problem);
      t.add(std::move(row));
    }
    s += "### TFLOP/s per model shape\n\n" + t.markdown() + "\n";
  }
  Table q({{"operand"}, {"scheme"}, {"problem"}, {"GB/s", Align::right}, {"median ms", Align::right}, {"spread", Align::right}});
  for (const auto& r : rows) {
    if (str(r, "type") != "quantizer") continue;
    const bool timed = str(r, "status") == "timed";
    q.add({str(r, "operand"), Cell::code(str(r, "scheme")), Cell::code(str(r, "problem")),
           timed ? fmt::format("{:.2f}", r.at("gbs").get<double>()) : "—",
           timed ? fmt::format("{:.3f}", r.at("median_ms").get<double>()) : "—",
           timed ? fmt::format("{:.1f}%", 100 * r.at("spread").get<double>()) : str(r, "reason")});
  }
  if (!q.empty()) s += "### Quantizers (preprocessing, reference quantizers on the CPU)\n\n" + q.markdown() + "\n";
  return s;
}

}  // namespace attest::conformance
