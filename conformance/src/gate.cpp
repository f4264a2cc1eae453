#include "attest/conformance/gate.hpp"
#include "attest/conformance/engine.hpp"

#include <omp.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>
#include <tuple>
#include <unordered_map>
#include <utility>

#include <fmt/format.h>

#include "attest/core/report/escape.hpp"
#include "attest/core/report/table.hpp"
#include "attest/core/status.hpp"
#include "attest/kernels/kernel.hpp"
#include "embedded.hpp"

namespace attest::conformance {
namespace {

using ::attest::report::Align;
using ::attest::report::Cell;
using ::attest::report::Column;
using ::attest::report::escape_xml;
using ::attest::report::Table;

int parse_int(std::string_view s, std::string_view what) {
  int v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || p != s.data() + s.size())
    throw Error(std::string(what) + " '" + std::string(s) + "' is not an integer");
  return v;
}

std::string first_line(const std::string& path) {
  std::ifstream in(path);
  std::string l;
  if (in) std::getline(in, l);
  return l;
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string l;
  while (std::getline(in, l))
    if (l.starts_with("model name")) {
      const auto c = l.find(':');
      return c == std::string::npos ? l : l.substr(c + 2);
    }
  return "unknown cpu";
}

kernels::Kernel& kernel_named(const std::string& name) {
  auto* k = kernels::Registry::instance().find(name);
  if (!k) {
    std::string valid;
    for (const auto& p : kernels::Registry::instance().all()) valid += (valid.empty() ? "" : " ") + p->name();
    throw Error("kernel '" + name + "' is not registered (registered: " + valid + ")");
  }
  return *k;
}

struct Counts {
  std::map<Verdict, std::size_t> n;
  std::size_t total = 0;
  void add(Verdict v) {
    ++n[v];
    ++total;
  }
  [[nodiscard]] std::size_t of(Verdict v) const {
    auto it = n.find(v);
    return it == n.end() ? 0 : it->second;
  }
};

constexpr Verdict kAll[] = {Verdict::passed, Verdict::failed, Verdict::unsupported, Verdict::mistrusted, Verdict::error,
                            Verdict::invalid, Verdict::fault, Verdict::accepted};

// A kernel's declarations as recorded in the report's meta, comma-separated ("" when none).
std::string declarations_of(const GateReport& r, const std::string& kernel) {
  std::string s;
  if (!r.meta.contains("declarations") || !r.meta["declarations"].contains(kernel)) return s;
  for (const auto& d : r.meta["declarations"][kernel]) s += (s.empty() ? "" : ", ") + d.get<std::string>();
  return s;
}

// A row for case c with its descriptor fields filled as run_check fills them, and no outcome yet.
Result stub_result(const Case& c) { return engine::make_result(c, c.check, Outcome{}, 0); }

// "2 worker processes (--isolate): worker 1 (pid 41): 12 results, died (SIGABRT); ..." or "" when
// the run was not isolated.
std::string workers_line(const GateReport& r) {
  if (!r.meta.contains("workers") || !r.meta["workers"].is_array()) return "";
  const auto& ws = r.meta["workers"];
  std::string s = fmt::format("{} worker process{} (--isolate):", ws.size(), ws.size() == 1 ? "" : "es");
  std::size_t i = 0;
  for (const auto& w : ws)
    s += fmt::format("{} worker {} (pid {}): {} results, {}", i++ ? ";" : "", w.value("worker", 0), w.value("pid", 0),
                     w.value("results", 0), w.value("ended", std::string("?")));
  return s;
}

std::string check_order_key(const std::string& check) {
  int i = 0;
  for (const Check* c : all_checks()) {
    if (c->name() == check) return fmt::format("{:02d}", i);
    ++i;
  }
  return "99" + check;
}

// Where the oracle-judged results of a run with device oracles (CheckOptions::device_oracles)
// were judged: "oracles: 12 results (accuracy, bitwise, subnormal) judged on the device engine:
// 1048576 of 1048576 output rows compared with FP64 on the device (gpu.ref64), 24576 rows
// emulated for budget and floor; 2 judged on the host (first: ...)"; "" for a run without them.
std::string oracles_line(const GateReport& r) {
  if (!r.meta.contains("oracles")) return "";
  std::size_t on_device = 0, on_host = 0;
  std::int64_t rows = 0, rows_total = 0, emulated = 0;
  std::string first_host;
  for (const auto& res : r.results) {
    const auto& f = res.outcome.figures;
    if (!f.is_object() || !f.contains("oracles")) continue;
    if (f["oracles"] == "device") {
      ++on_device;
      if (f.contains("sample") && f["sample"].contains("coverage")) {
        const auto& cov = f["sample"]["coverage"];
        rows += cov.value("rows_compared_fp64", std::int64_t{0});
        rows_total += cov.value("rows_total", std::int64_t{0});
        emulated += cov.value("rows_emulated", std::int64_t{0});
      }
    } else {
      ++on_host;
      if (first_host.empty()) first_host = res.check + ": " + f.value("oracles_why", std::string("?"));
    }
  }
  std::string s = fmt::format("oracles: {} results (accuracy, bitwise, subnormal) judged on the device engine: {} of {} "
                              "output rows compared with FP64 on the device (gpu.ref64), {} rows emulated for budget and floor",
                              on_device, rows, rows_total, emulated);
  if (on_host > 0) s += fmt::format("; {} judged on the host (first: {})", on_host, first_host);
  return s;
}

}  // namespace

Shard parse_shard(std::string_view s) {
  const auto slash = s.find('/');
  if (slash == std::string_view::npos) throw Error("shard '" + std::string(s) + "' must be i/n");
  Shard sh{parse_int(s.substr(0, slash), "shard index"), parse_int(s.substr(slash + 1), "shard count")};
  if (sh.count < 1 || sh.index < 0 || sh.index >= sh.count)
    throw Error("shard '" + std::string(s) + "': need 0 <= i < n");
  return sh;
}

Shard shard_from_environment() {
  const char* i = std::getenv("GTEST_SHARD_INDEX");
  const char* n = std::getenv("GTEST_TOTAL_SHARDS");
  if (!i || !n) return {};
  return parse_shard(std::string(i) + "/" + n);
}

int GateReport::exit_code() const {
  if (!errors.empty()) return 1;
  for (const auto& r : results)
    if (!verdict_ok(r.outcome.verdict)) return 1;
  return 0;
}

std::string detect_profile() {
#if defined(ATTEST_GPU_BACKEND)
  const std::string backend = ATTEST_GPU_BACKEND;
#else
  const std::string backend = "none";
#endif
  if (backend == "none") return "cpu";
  if (backend == "cuda") return "sm90";
  // KFD publishes gfx_target_version as major*10000 + minor*100 + stepping (90402 = gfx942).
  for (int node = 0; node < 64; ++node) {
    std::ifstream in("/sys/class/kfd/kfd/topology/nodes/" + std::to_string(node) + "/properties");
    if (!in) break;
    for (std::string key, value; in >> key >> value;)
      if (key == "gfx_target_version") {
        if (value == "90402") return "gfx942";
        if (value == "90500") return "gfx950";
        if (value == "120001") return "gfx1201";
      }
  }
  throw Error("qualify: no gfx942, gfx950 or gfx1201 device found in the KFD topology (pass --profile)");
}

nlohmann::json suite_info() {
  nlohmann::json j;
  j["suite"] = "attest 0.1.0";
  j["commit"] = std::string(embedded::git_commit());
  j["dirty"] = embedded::git_dirty();
  utsname u{};
  ::uname(&u);
  j["host"] = std::string(u.nodename);
  j["cpu"] = cpu_model();
  j["os"] = std::string(u.sysname) + " " + u.release;
  if (auto nv = first_line("/proc/driver/nvidia/version"); !nv.empty()) j["nvidia_driver"] = nv;
  if (auto amd = first_line("/sys/module/amdgpu/version"); !amd.empty()) j["amdgpu_driver"] = amd;
#if defined(ATTEST_GPU_BACKEND)
  j["backend"] = ATTEST_GPU_BACKEND;
#else
  j["backend"] = "none";
#endif
  j["device"] = j["backend"] == "none" ? "cpu: " + cpu_model() : j["backend"].get<std::string>();
  j["driver"] = j.contains("nvidia_driver") ? j["nvidia_driver"]
                : j.contains("amdgpu_driver") ? j["amdgpu_driver"] : nlohmann::json(j["os"]);
  return j;
}

std::vector<Result> run_cases(const std::vector<Case>& cases, const ToleranceTable& tol, const CheckOptions& copt) {
  std::vector<Result> out;
  const int omp_before = omp_get_max_threads();
  omp_set_num_threads(1);  // small problems: OpenMP teams cost more than they save (see run_gate)
  struct Restore {
    int n;
    ~Restore() { omp_set_num_threads(n); }
  } restore{omp_before};
  for (const auto& c : cases) {
    CheckOptions o = copt;
    o.refusal_row = c.check.empty() || c.check == "refusal";
    if (o.device_oracles && o.device_threads <= 0) o.device_threads = std::max(1, omp_before);
    if (!o.refusal_row)
      for (const Check* m : match_checks(c.check)) o.refusal_row = o.refusal_row || m->name() == "refusal";
    Context ctx(c, kernel_named(c.kernel), tol, o);
    if (c.check.empty()) {
      for (const Check* ch : all_checks()) out.push_back(run_check(ctx, *ch));
    } else {
      const Check* ch = find_check(c.check);
      if (!ch) (void)match_checks(c.check);  // throws with the valid names
      for (const Check* m : match_checks(c.check)) out.push_back(run_check(ctx, *m));
    }
  }
  return out;
}

namespace {

// The selected cases of the case set, or an input error (exit 2) before anything is written: an
// empty selection proves nothing, and device oracles need a GPU build.
Expansion expand_selection(const GateOptions& opt) {
  if (opt.check.device_oracles && !engine::has_device_backend())
    throw Error("gate: device oracles (the FP64 reference, floor and comparisons on the device engine) need attest built "
                "with a GPU backend; this one was built with ATTEST_GPU=none (ATTEST_GPU=cuda pip install ./python, or "
                "scripts/device/build-python-cuda)");
  auto ex = expand(opt.cases, opt.profile, opt.selection);
  if (ex.cases.empty() && ex.errors.empty())
    throw Error(fmt::format("gate: the selection (kernel '{}', recipe '{}', check '{}') matches no case of case set '{}' "
                            "in profile {}", opt.selection.kernel.empty() ? "*" : opt.selection.kernel,
                            opt.selection.recipe.empty() ? "*" : opt.selection.recipe,
                            opt.selection.check.empty() ? "*" : opt.selection.check, opt.cases.name, opt.profile.name));
  return ex;
}

// This shard's groups of cases, in case order. Groups share inputs, oracles and the baseline run;
// they are the unit of sharding and of parallel work.
std::vector<std::vector<Case>> shard_groups(std::vector<Case> cases, const Shard& shard) {
  std::vector<std::vector<Case>> groups;
  std::unordered_map<std::string, std::size_t> at;
  for (auto& c : cases) {
    const auto key = group_key(c);
    auto [it, fresh] = at.emplace(key, groups.size());
    if (fresh) groups.emplace_back();
    groups[it->second].push_back(std::move(c));
  }
  std::vector<std::vector<Case>> mine;
  for (std::size_t g = 0; g < groups.size(); ++g)
    if (static_cast<int>(g % static_cast<std::size_t>(shard.count)) == shard.index) mine.push_back(std::move(groups[g]));
  return mine;
}

// What a resumed run reads back from its journal.
struct JournalBefore {
  std::unordered_map<std::string, Result> done;  // by descriptor
  // Worker processes of `gate --isolate` recorded in the journal ({"worker": ...} lines open a
  // worker's part, the supervisor's {"worker_end": ...} says how it ended), for meta.workers.
  nlohmann::json workers = nlohmann::json::array();
};

// Counts result r into a worker's meta.workers entry.
void count_worker_result(nlohmann::json& worker, const Result& r) {
  worker["results"] = worker["results"].get<std::size_t>() + 1;
  if (worker["first"] == "") worker["first"] = r.descriptor;
  worker["last"] = r.descriptor;
}

JournalBefore read_journal(const std::filesystem::path& path) {
  JournalBefore before;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    try {
      const auto j = nlohmann::json::parse(line);
      if (j.is_object() && j.contains("worker")) {
        before.workers.push_back({{"worker", j["worker"].value("index", 0)}, {"pid", j["worker"].value("pid", 0)},
                                  {"results", 0}, {"first", ""}, {"last", ""}, {"ended", "?"}});
        continue;
      }
      if (j.is_object() && j.contains("worker_end")) {
        for (auto& w : before.workers)
          if (w["pid"] == j["worker_end"].value("pid", -1)) w["ended"] = j["worker_end"].value("ended", "?");
        continue;
      }
      auto r = result_from_json(j);  // an {"inflight": ...} marker is no result: skipped here
      if (!before.workers.empty()) count_worker_result(before.workers.back(), r);
      before.done[r.descriptor] = std::move(r);
    } catch (const std::exception&) {
      // A line cut short by a crash: that case runs again.
    }
  }
  return before;
}

// The execution of this shard's groups: worker threads take whole groups; each result goes to its
// case's position in the report and, as it comes, to the journal.
class GateRun {
 public:
  GateRun(const GateOptions& opt, const ToleranceTable& tol, const std::vector<std::vector<Case>>& groups,
          const std::unordered_map<std::string, Result>& done_before, GateReport& rep)
      : opt_(opt),
        tol_(tol),
        groups_(groups),
        done_before_(done_before),
        rep_(rep),
        first_index_(groups.size() + 1, 0) {
    if (!opt.journal.empty()) {
      if (opt.journal.has_parent_path()) std::filesystem::create_directories(opt.journal.parent_path());
      journal_ = std::fopen(opt.journal.c_str(), opt.resume ? "a" : "w");
      if (!journal_) throw Error("journal '" + opt.journal.string() + "': cannot be opened for writing");
    }
    if (opt.isolate_worker > 0) {
      self_worker_ = {{"worker", opt.isolate_worker}, {"pid", static_cast<long>(::getpid())}, {"results", 0},
                      {"first", ""}, {"last", ""}, {"ended", "finished (wrote the reports)"}};
      if (journal_) {
        const std::string line =
            nlohmann::json{{"worker", {{"index", opt.isolate_worker}, {"pid", static_cast<long>(::getpid())}}}}.dump() + "\n";
        std::fputs(line.c_str(), journal_);
        std::fflush(journal_);
      }
    }
    for (std::size_t g = 0; g < groups.size(); ++g) first_index_[g + 1] = first_index_[g] + groups[g].size();
    total_ = first_index_.back();
    rep.results.resize(total_);
    filled_.assign(total_, false);
    // An isolated worker runs one case at a time: when the process dies, the one in-flight marker
    // names the check it died in.
    jobs_ = opt.isolate_worker > 0
                ? 1
                : std::max(1, std::min<int>(opt.jobs, static_cast<int>(std::max<std::size_t>(1, groups.size()))));
  }
  GateRun(const GateRun&) = delete;
  GateRun& operator=(const GateRun&) = delete;
  ~GateRun() {
    if (journal_) std::fclose(journal_);
  }

  // Every case: the groups on jobs_ threads, then the runs_alone() checks on this one. Rethrows
  // the first exception of a thread. True when an isolated worker stopped after a fault row of
  // its own: the rest of the run belongs to a fresh process.
  bool run() {
    if (jobs_ == 1) {
      worker();
    } else {
      std::vector<std::thread> pool;
      for (int i = 0; i < jobs_; ++i) pool.emplace_back([this] { worker(); });
      for (auto& t : pool) t.join();
      run_alone();
    }
    if (journal_) {
      std::fclose(journal_);
      journal_ = nullptr;
    }
    if (failure_) std::rethrow_exception(failure_);
    if (stop_) std::erase_if(rep_.results, [&, i = std::size_t{0}](const Result&) mutable { return !filled_[i++]; });
    return stop_;
  }

  // This process's meta.workers entry (an isolated worker's).
  [[nodiscard]] const nlohmann::json& self_worker() const { return self_worker_; }

 private:
  // Records the result of case `pos` (resumed: read back from the journal, not written again).
  void finish(std::size_t pos, Result r, bool resumed) {
    const std::string line = journal_ && !resumed ? to_json(r).dump() + "\n" : std::string();  // outside the lock
    std::lock_guard<std::mutex> lock(mu_);
    if (!line.empty()) {
      std::fputs(line.c_str(), journal_);
      std::fflush(journal_);
    }
    if (!resumed && opt_.isolate_worker > 0) count_worker_result(self_worker_, r);
    rep_.results[pos] = std::move(r);
    filled_[pos] = true;
    ++done_;
    rep_.resumed += resumed;
    if (opt_.on_result) opt_.on_result(rep_.results[pos], done_, total_);
  }

  // Before each check of an isolated worker: the case's row as the supervisor writes it if this
  // process dies during the check (flushed: it must be on disk before the kernel runs).
  void mark_inflight(const Case& c) {
    if (opt_.isolate_worker <= 0 || !journal_) return;
    Result r = stub_result(c);
    r.outcome = {Verdict::fault, "in flight", {}};
    const double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    const std::string line = nlohmann::json{{"inflight", to_json(r)}, {"t", now}}.dump() + "\n";
    std::lock_guard<std::mutex> lock(mu_);
    std::fputs(line.c_str(), journal_);
    std::fflush(journal_);
  }

  // A group's refusal row (expand() adds one unless the selection leaves refusal out) judges a
  // refusal inside the declarations once; without it every check of the group fails with it.
  [[nodiscard]] CheckOptions group_options(const std::vector<Case>& group) const {
    CheckOptions o = opt_.check;
    for (const Case& c : group) o.refusal_row = o.refusal_row || c.check == "refusal";
    if (o.device_oracles && o.device_threads <= 0) o.device_threads = std::max(1, omp_get_num_procs() / jobs_);
    return o;
  }

  // The check of a resumed case's fault row in group g ("" when none): as Context::run_on does in
  // one process, the case makes no further kernel call (the row was written by an isolated
  // worker, or by the supervisor for a process that died in this case).
  [[nodiscard]] std::string faulted_check(std::size_t g) const {
    std::string faulted;
    for (const Case& c : groups_[g])
      if (auto it = done_before_.find(to_string(c)); it != done_before_.end() && it->second.outcome.verdict == Verdict::fault)
        faulted = it->second.check;
    return faulted;
  }

  // The cases of group g in order, on one Context; runs_alone() checks are deferred to
  // run_alone() when other threads run.
  void run_group(std::size_t g) {
    std::optional<Context> ctx;
    const std::string faulted = faulted_check(g);
    for (std::size_t i = 0; i < groups_[g].size(); ++i) {
      const Case& c = groups_[g][i];
      const auto desc = to_string(c);
      if (auto it = done_before_.find(desc); it != done_before_.end()) {
        finish(first_index_[g] + i, it->second, true);
        continue;
      }
      if (!faulted.empty()) {
        Result r = stub_result(c);
        r.outcome = {Verdict::unsupported,
                     "not run: the kernel faulted earlier in this case (judged by the fault row of check " + faulted + ")",
                     {}};
        finish(first_index_[g] + i, std::move(r), false);
        continue;
      }
      if (stop_) break;
      const Check& check = *find_check(c.check);
      if (check.runs_alone() && jobs_ > 1) {
        std::lock_guard<std::mutex> lock(mu_);
        alone_.emplace_back(g, i);
        continue;
      }
      if (!ctx) ctx.emplace(c, kernel_named(c.kernel), tol_, group_options(groups_[g]));
      mark_inflight(c);
      Result r = run_check(*ctx, check);
      const bool fault = r.outcome.verdict == Verdict::fault;
      finish(first_index_[g] + i, std::move(r), false);
      if (fault && opt_.isolate_worker > 0) stop_ = true;
    }
  }

  void worker() {
    // Parallel across groups, never inside them: conformance problems are small, and OpenMP
    // teams on a loaded 2-core host spin far longer than the work takes (measured: 5x the CPU
    // time on the smoke set).
    const int omp_before = omp_get_max_threads();
    omp_set_num_threads(1);
    try {
      for (std::size_t g; !stop_ && (g = next_++) < groups_.size();) run_group(g);
    } catch (...) {
      std::lock_guard<std::mutex> lock(mu_);
      if (!failure_) failure_ = std::current_exception();
    }
    omp_set_num_threads(omp_before);
  }

  // Second phase, on this thread alone: the graph-capturing checks, in case order (OpenMP
  // single-threaded as in the workers).
  void run_alone() {
    std::sort(alone_.begin(), alone_.end());
    const int omp_before = omp_get_max_threads();
    omp_set_num_threads(1);
    std::optional<Context> ctx;
    std::size_t ctx_group = groups_.size();
    try {
      for (const auto& [g, i] : alone_) {
        const Case& c = groups_[g][i];
        if (ctx_group != g) {
          ctx.emplace(c, kernel_named(c.kernel), tol_, group_options(groups_[g]));
          ctx_group = g;
        }
        mark_inflight(c);
        finish(first_index_[g] + i, run_check(*ctx, *find_check(c.check)), false);
      }
    } catch (...) {
      if (!failure_) failure_ = std::current_exception();
    }
    omp_set_num_threads(omp_before);
  }

  const GateOptions& opt_;
  const ToleranceTable& tol_;
  const std::vector<std::vector<Case>>& groups_;
  const std::unordered_map<std::string, Result>& done_before_;
  GateReport& rep_;
  std::FILE* journal_ = nullptr;
  nlohmann::json self_worker_;
  std::vector<std::size_t> first_index_;  // result position of each group's first case
  std::size_t total_ = 0, done_ = 0;
  std::vector<bool> filled_;
  int jobs_ = 1;
  std::mutex mu_;
  // An isolated worker wrote a fault row of its own: the next case needs a fresh process.
  std::atomic<bool> stop_{false};
  std::atomic<std::size_t> next_{0};
  std::exception_ptr failure_;
  std::vector<std::pair<std::size_t, std::size_t>> alone_;  // (group, case) of runs_alone() checks
};

// Coverage per kernel x check, in result order.
std::vector<Coverage> coverage_of(const std::vector<Result>& results) {
  std::vector<Coverage> coverage;
  std::map<std::pair<std::string, std::string>, std::size_t> at;
  for (const auto& res : results) {
    auto [it, fresh] = at.emplace(std::pair{res.kernel, res.check}, coverage.size());
    if (fresh) {
      Coverage c;
      c.kernel = res.kernel;
      c.check = res.check;
      const Check* ch = find_check(res.check);
      // A kernel that cannot run on this host at all (Capabilities::unavailable, e.g. a GPU
      // kernel without a device) declares nothing here; it fails the gate once, below.
      const kernels::Kernel& k = kernel_named(res.kernel);
      c.declared = ch != nullptr && k.capabilities().unavailable.empty() && ch->declared_by(k);
      coverage.push_back(std::move(c));
    }
    Coverage& c = coverage[it->second];
    ++c.cases;
    c.judged += res.outcome.verdict != Verdict::unsupported;
    c.passed += res.outcome.verdict == Verdict::passed;
    if (res.outcome.verdict == Verdict::unsupported && c.first_unsupported.empty()) c.first_unsupported = res.outcome.reason;
  }
  return coverage;
}

// The errors coverage implies. A check the kernel declares, with cases, must judge at least one:
// otherwise a kernel that is refused (or refuses) everything would pass the gate. (A pair whose
// cases were judged and none passed has failed cases already.) Judged only on a whole run: a
// shard may legitimately hold no judged case of a pair.
std::vector<std::string> coverage_errors(const std::vector<Coverage>& coverage, const Shard& shard) {
  std::vector<std::string> errors;
  // A selected kernel that cannot run here judged nothing: one error naming it and why, so a
  // GPU profile on a host without a usable GPU never says PASSED (checked on every shard).
  std::vector<std::string> unavailable_seen;
  for (const auto& c : coverage) {
    if (std::find(unavailable_seen.begin(), unavailable_seen.end(), c.kernel) != unavailable_seen.end()) continue;
    const std::string why = kernel_named(c.kernel).capabilities().unavailable;
    if (why.empty()) continue;
    unavailable_seen.push_back(c.kernel);
    // No case count: the same line on every shard, so `report merge` keeps one.
    errors.push_back(fmt::format("kernel {} is unavailable on this host ({}): none of its cases could run", c.kernel, why));
  }
  if (shard.count == 1)
    for (const auto& c : coverage)
      if (c.declared && c.cases > 0 && c.judged == 0)
        errors.push_back(fmt::format("coverage: kernel {} declares check {} but none of its {} cases was judged (first "
                                     "unsupported: {})",
                                     c.kernel, c.check, c.cases, c.first_unsupported));
  return errors;
}

// The report's meta: the suite and host, what was selected and how it was judged. workers:
// meta.workers of an isolated worker (null otherwise).
nlohmann::json gate_meta(const GateOptions& opt, const ToleranceTable& tol, const std::vector<Coverage>& coverage,
                         nlohmann::json workers) {
  nlohmann::json meta = suite_info();
  meta["profile"] = opt.profile.name;
  meta["fp8"] = opt.profile.fp8;
  meta["mx"] = opt.profile.mx;
  meta["cases"] = opt.cases.name;
  meta["shard"] = fmt::format("{}/{}", opt.shard.index, opt.shard.count);
  // Every kernel's declarations (kernels::declared_properties), shown beside its verdicts: a
  // user sees "ftz" next to the subnormal rows it explains. In meta, so `report merge` keeps it.
  meta["declarations"] = nlohmann::json::object();
  for (const auto& c : coverage)
    if (!meta["declarations"].contains(c.kernel))
      meta["declarations"][c.kernel] = kernels::declared_properties(kernel_named(c.kernel).capabilities());
  if (!workers.is_null()) meta["workers"] = std::move(workers);
  if (opt.check.device_oracles)
    meta["oracles"] = {{"where", "device"}, {"sample_macs", opt.check.device_sample_macs}};
  meta["selection"] = {{"kernel", opt.selection.kernel}, {"recipe", opt.selection.recipe}, {"check", opt.selection.check}};
  meta["tolerances"] = {{"source", tol.is_builtin() ? std::string("built-in") : tol.source()},
                        {"hash", tol.hash()}, {"builtin", tol.is_builtin()}};
  return meta;
}

}  // namespace

GateReport run_gate(const GateOptions& opt) {
  const auto t0 = std::chrono::steady_clock::now();
  const ToleranceTable& tol = opt.tolerances ? *opt.tolerances : ToleranceTable::builtin();
  GateReport rep;
  auto ex = expand_selection(opt);
  rep.errors = ex.errors;
  const auto groups = shard_groups(std::move(ex.cases), opt.shard);
  const JournalBefore before = !opt.journal.empty() && opt.resume ? read_journal(opt.journal) : JournalBefore{};

  nlohmann::json workers;  // meta.workers: those of the journal, then this process (isolated workers only)
  {
    GateRun execution(opt, tol, groups, before.done, rep);
    if (execution.run()) {
      rep.stopped = true;  // the rest of the run belongs to a fresh process (the supervisor resumes from the journal)
      return rep;
    }
    if (opt.isolate_worker > 0) {
      workers = before.workers;
      workers.push_back(execution.self_worker());
    }
  }

  rep.coverage = coverage_of(rep.results);
  for (auto& e : coverage_errors(rep.coverage, opt.shard)) rep.errors.push_back(std::move(e));
  rep.meta = gate_meta(opt, tol, rep.coverage, std::move(workers));
  rep.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return rep;
}

std::string summary_table(const GateReport& r) {
  std::map<std::tuple<std::string, std::string, std::string>, Counts> rows;
  Counts all;
  for (const auto& res : r.results) {
    rows[{res.kernel, res.recipe, check_order_key(res.check) + res.check}].add(res.outcome.verdict);
    all.add(res.outcome.verdict);
  }
  std::size_t wk = 6, wr = 6, wc = 5;
  for (const auto& [k, c] : rows) {
    wk = std::max(wk, std::get<0>(k).size());
    wr = std::max(wr, std::get<1>(k).size());
    wc = std::max(wc, std::get<2>(k).size() - 2);
  }
  wr = std::min<std::size_t>(wr, 40);
  std::string s = fmt::format("{:<{}}  {:<{}}  {:<{}}  {:>6} {:>6} {:>11} {:>10} {:>5} {:>7} {:>5}\n", "kernel", wk, "recipe",
                              wr, "check", wc, "passed", "failed", "unsupported", "mistrusted", "error", "invalid", "fault");
  for (const auto& [k, c] : rows) {
    std::string rec = std::get<1>(k);
    if (rec.size() > wr) rec = rec.substr(0, wr - 3) + "...";
    s += fmt::format("{:<{}}  {:<{}}  {:<{}}  {:>6} {:>6} {:>11} {:>10} {:>5} {:>7} {:>5}\n", std::get<0>(k), wk, rec, wr,
                     std::get<2>(k).substr(2), wc, c.of(Verdict::passed), c.of(Verdict::failed), c.of(Verdict::unsupported),
                     c.of(Verdict::mistrusted), c.of(Verdict::error), c.of(Verdict::invalid), c.of(Verdict::fault));
  }
  s += fmt::format("total {} cases: {} passed, {} failed, {} unsupported, {} mistrusted, {} error, {} invalid", all.total,
                   all.of(Verdict::passed), all.of(Verdict::failed), all.of(Verdict::unsupported),
                   all.of(Verdict::mistrusted), all.of(Verdict::error), all.of(Verdict::invalid));
  if (all.of(Verdict::fault)) s += fmt::format(", {} fault", all.of(Verdict::fault));
  if (all.of(Verdict::accepted)) s += fmt::format(", {} accepted (declared known defects)", all.of(Verdict::accepted));
  if (r.resumed) s += fmt::format(" ({} resumed from the journal)", r.resumed);
  s += "\n";
  if (const auto w = workers_line(r); !w.empty()) s += w + "\n";
  if (const auto o = oracles_line(r); !o.empty()) s += o + "\n";
  // Coverage: cases judged / cases selected per kernel x check (`-` marks a check the kernel
  // does not declare, so n/a is allowed there).
  if (!r.coverage.empty()) {
    s += "coverage (cases judged / cases selected; - = check not declared by the kernel):\n";
    std::map<std::string, std::string> per_kernel;
    std::vector<std::string> order;
    for (const auto& c : r.coverage) {
      auto [it, fresh] = per_kernel.emplace(c.kernel, "");
      if (fresh) order.push_back(c.kernel);
      it->second += fmt::format(" {}{} {}/{}", c.check, c.declared ? "" : "-", c.judged, c.cases);
    }
    for (const auto& k : order) {
      s += "  " + k + ":" + per_kernel[k];
      if (const auto d = declarations_of(r, k); !d.empty()) s += "  | declares: " + d;
      s += "\n";
    }
  }
  for (const auto& e : r.errors) s += (e.starts_with("coverage:") ? "" : "setup error: ") + e + "\n";
  return s;
}

std::string markdown_report(const GateReport& r) {
  Counts all;
  std::vector<std::string> checks;
  std::map<std::pair<std::string, std::string>, std::map<std::string, Counts>> matrix;
  for (const auto& res : r.results) {
    all.add(res.outcome.verdict);
    matrix[{res.kernel, res.recipe}][res.check].add(res.outcome.verdict);
    if (std::find(checks.begin(), checks.end(), res.check) == checks.end()) checks.push_back(res.check);
  }
  std::sort(checks.begin(), checks.end(),
            [](const std::string& a, const std::string& b) { return check_order_key(a) + a < check_order_key(b) + b; });
  const bool ok = r.exit_code() == 0;
  auto meta = [&](const char* k) { return r.meta.contains(k) ? r.meta[k].get<std::string>() : std::string("?"); };
  std::string s = fmt::format("## attest gate: {}\n\n", ok ? "PASSED" : "FAILED");
  const bool dirty = r.meta.value("dirty", false);
  const std::string tol = r.meta.contains("tolerances") ? r.meta["tolerances"].value("source", "?") + " (" +
                                                              r.meta["tolerances"].value("hash", "?") + ")"
                                                        : "?";
  s += fmt::format("Profile `{}`, cases `{}`, shard {}, suite `{}{}`, device {}, tolerances {}.\n\n", meta("profile"),
                   meta("cases"), meta("shard"), meta("commit"), dirty ? "+dirty" : "", meta("device"), tol);
  if (const auto w = workers_line(r); !w.empty()) s += "Fault containment: " + w + ".\n\n";
  if (const auto o = oracles_line(r); !o.empty()) s += "Coverage of the " + o + ".\n\n";
  Table counts({{"verdict"}, {"cases", Align::right}});
  for (Verdict v : kAll) counts.add({std::string(verdict_name(v)), std::to_string(all.of(v))});
  counts.add({Cell::strong("total"), Cell::strong(std::to_string(all.total))});
  s += counts.markdown();
  if (!r.errors.empty()) {
    s += "\n**Setup errors**\n\n";
    for (const auto& e : r.errors) s += "- " + e + "\n";
  }
  if (!matrix.empty()) {
    // The kernels' declarations beside their verdicts (a report without them, e.g. one written
    // before they were recorded, has no such column).
    const bool with_decl = r.meta.contains("declarations");
    std::vector<Column> cols = {{"kernel"}, {"recipe"}};
    if (with_decl) cols.push_back({"declares"});
    for (const auto& c : checks) cols.push_back({c});
    Table t(std::move(cols));
    for (const auto& [kr, per] : matrix) {
      const auto decl = declarations_of(r, kr.first);
      std::vector<Cell> row = {Cell::code(kr.first), Cell::code(kr.second)};
      if (with_decl) row.push_back(decl.empty() ? Cell("-") : Cell(decl));
      for (const auto& c : checks) {
        auto it = per.find(c);
        if (it == per.end()) {
          row.push_back(Cell::absent());
          continue;
        }
        const Counts& n = it->second;
        const std::size_t bad = n.total - n.of(Verdict::passed) - n.of(Verdict::unsupported);
        if (bad > 0) row.push_back(Cell::strong(fmt::format("{}/{} not passed", bad, n.total)));
        else if (n.of(Verdict::passed) == 0) row.push_back("n/a");
        else row.push_back(fmt::format("{}/{}", n.of(Verdict::passed), n.total));
      }
      t.add(std::move(row));
    }
    s += "\n" + t.markdown();
  }
  std::size_t shown = 0, bad_total = 0;
  std::string failures;
  for (const auto& res : r.results) {
    if (verdict_ok(res.outcome.verdict)) continue;
    ++bad_total;
    if (shown++ >= 50) continue;
    failures += fmt::format("- **{}** `{}` `{}` {}: {}\n  ```\n  attest run '{}'\n  ```\n", verdict_name(res.outcome.verdict),
                            res.kernel, res.recipe, res.check, res.outcome.reason, res.descriptor);
  }
  if (bad_total) {
    s += fmt::format("\n### Not passed ({})\n\n", bad_total) + failures;
    if (bad_total > 50) s += fmt::format("\n... and {} more (see the JSONL journal).\n", bad_total - 50);
  }
  return s;
}

std::string junit_report(const GateReport& r) {
  std::map<std::string, std::vector<const Result*>> suites;
  Counts all;
  double total_time = 0;
  for (const auto& res : r.results) {
    suites[res.kernel + " " + res.recipe].push_back(&res);
    all.add(res.outcome.verdict);
    total_time += res.seconds;
  }
  const std::size_t failures = all.of(Verdict::failed) + all.of(Verdict::mistrusted);
  const std::size_t errors = all.of(Verdict::error) + all.of(Verdict::invalid) + all.of(Verdict::fault) + r.errors.size();
  std::string s = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  s += fmt::format("<testsuites name=\"attest gate\" tests=\"{}\" failures=\"{}\" errors=\"{}\" skipped=\"{}\" time=\"{:.3f}\">\n",
                   all.total + r.errors.size(), failures, errors, all.of(Verdict::unsupported), total_time);
  if (!r.errors.empty()) {
    s += fmt::format("  <testsuite name=\"setup\" tests=\"{}\" failures=\"0\" errors=\"{}\" skipped=\"0\" time=\"0.000\">\n",
                     r.errors.size(), r.errors.size());
    for (std::size_t i = 0; i < r.errors.size(); ++i)
      s += fmt::format("    <testcase classname=\"setup\" name=\"setup error {}\" time=\"0.000\">\n"
                       "      <error message=\"{}\" type=\"setup\"/>\n    </testcase>\n",
                       i + 1, escape_xml(r.errors[i]));
    s += "  </testsuite>\n";
  }
  for (const auto& [name, list] : suites) {
    Counts c;
    double t = 0;
    for (const auto* res : list) c.add(res->outcome.verdict), t += res->seconds;
    s += fmt::format("  <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"{}\" skipped=\"{}\" time=\"{:.3f}\">\n",
                     escape_xml(name), c.total, c.of(Verdict::failed) + c.of(Verdict::mistrusted),
                     c.of(Verdict::error) + c.of(Verdict::invalid) + c.of(Verdict::fault), c.of(Verdict::unsupported), t);
    for (const auto* res : list) {
      const auto& o = res->outcome;
      s += fmt::format("    <testcase classname=\"{}\" name=\"{}\" time=\"{:.3f}\"", escape_xml(res->kernel + "." + res->check),
                       escape_xml(res->descriptor), res->seconds);
      const std::string repro = "attest run '" + res->descriptor + "'";
      switch (o.verdict) {
        case Verdict::passed: s += "/>\n"; continue;
        case Verdict::unsupported:
        case Verdict::accepted:
          s += fmt::format(">\n      <skipped message=\"{}\"/>\n", escape_xml(o.reason));
          break;
        case Verdict::failed:
        case Verdict::mistrusted:
          s += fmt::format(">\n      <failure message=\"{}\" type=\"{}\">{}</failure>\n", escape_xml(o.reason),
                           verdict_name(o.verdict), escape_xml(repro));
          break;
        case Verdict::error:
        case Verdict::invalid:
        case Verdict::fault:
          s += fmt::format(">\n      <error message=\"{}\" type=\"{}\">{}</error>\n", escape_xml(o.reason),
                           verdict_name(o.verdict), escape_xml(repro));
          break;
      }
      s += "    </testcase>\n";
    }
    s += "  </testsuite>\n";
  }
  s += "</testsuites>\n";
  return s;
}

nlohmann::json json_report(const GateReport& r) {
  nlohmann::json j;
  j["meta"] = r.meta;
  j["exit_code"] = r.exit_code();
  j["seconds"] = r.seconds;
  j["errors"] = r.errors;
  for (const auto& c : r.coverage)
    j["coverage"].push_back({{"kernel", c.kernel}, {"check", c.check}, {"cases", c.cases}, {"judged", c.judged},
                             {"passed", c.passed}, {"declared", c.declared},
                             {"declares", r.meta.contains("declarations") && r.meta["declarations"].contains(c.kernel)
                                              ? r.meta["declarations"][c.kernel]
                                              : nlohmann::json::array()}});
  Counts all;
  for (const auto& res : r.results) all.add(res.outcome.verdict);
  for (Verdict v : kAll) j["counts"][std::string(verdict_name(v))] = all.of(v);
  j["counts"]["total"] = all.total;
  j["resumed"] = r.resumed;
  auto& rs = j["results"] = nlohmann::json::array();
  for (const auto& res : r.results) rs.push_back(to_json(res));
  return j;
}

std::string dump_result(const Result& r) {
  std::string s = fmt::format("{:<11} {}  ({:.3f} s)\n", verdict_name(r.outcome.verdict), r.check, r.seconds);
  if (!r.outcome.reason.empty()) s += "  reason: " + r.outcome.reason + "\n";
  if (!r.outcome.figures.is_null() && !r.outcome.figures.empty()) {
    std::istringstream in(r.outcome.figures.dump(2));
    for (std::string line; std::getline(in, line);) s += "  " + line + "\n";
  }
  if (!verdict_ok(r.outcome.verdict)) s += "  repro: attest run '" + r.descriptor + "'\n";
  return s;
}

}  // namespace attest::conformance
