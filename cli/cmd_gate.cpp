// `attest gate` and `attest qualify`: run a profile's case set through every check and report.
// With --isolate this process is a supervisor that runs no kernel: it runs the gate in worker
// processes (itself, exec'd) and turns a worker's death into the fault row of the check it was in.
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
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
  bool isolate = false;       // supervise worker processes (docs/gate.md, "Fault containment")
  double case_timeout = 0;    // with --isolate: seconds without journal progress before a worker is killed
  int isolate_worker = 0;     // hidden: > 0 in a worker process started by the supervisor
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
  c->add_flag("--isolate", a.isolate,
              "Run the kernels in worker processes, one case at a time: a worker that dies (segfault, abort) or hangs "
              "past --case-timeout gives a fault row for the check it was in, and the gate goes on in a fresh worker");
  c->add_option("--case-timeout", a.case_timeout,
                "With --isolate: seconds a check may run without finishing before its worker is killed (a hang: fault row)")
      ->check(CLI::PositiveNumber);
  c->add_option("--isolate-worker", a.isolate_worker)->group("");  // set by the supervisor on its workers
}

// --- fault containment (--isolate) ---

constexpr int kWorkerRestart = 75;  // a worker's exit code: it wrote a fault row, the next case needs a fresh process
constexpr int kMaxWorkers = 65;     // 64 restarts

std::string signal_name(int sig) {
  static const std::pair<int, const char*> names[] = {
      {SIGSEGV, "SIGSEGV"}, {SIGABRT, "SIGABRT"}, {SIGBUS, "SIGBUS"},   {SIGFPE, "SIGFPE"},   {SIGILL, "SIGILL"},
      {SIGKILL, "SIGKILL"}, {SIGTRAP, "SIGTRAP"}, {SIGSYS, "SIGSYS"},   {SIGPIPE, "SIGPIPE"}, {SIGTERM, "SIGTERM"},
      {SIGINT, "SIGINT"},   {SIGHUP, "SIGHUP"},   {SIGQUIT, "SIGQUIT"}, {SIGXCPU, "SIGXCPU"}, {SIGXFSZ, "SIGXFSZ"}};
  for (const auto& [n, name] : names)
    if (n == sig) return name;
  return "signal " + std::to_string(sig);
}

double unix_now() { return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count(); }

// The worker's command line: the same gate, one case at a time, resuming after the first worker.
std::vector<std::string> worker_argv(const GateArgs& a, const std::string& cases, const std::string& profile, bool qualify,
                                     int index, bool resume) {
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) throw Error("gate --isolate: cannot find this program (/proc/self/exe): " + ec.message());
  std::vector<std::string> v = {exe.string(), qualify ? "qualify" : "gate"};
  auto opt = [&](const char* name, const std::string& value) {
    if (!value.empty()) v.push_back(std::string(name) + "=" + value);
  };
  opt("--profile", profile);
  opt("--cases", cases);
  opt("--out", a.out);
  opt("--kernel", a.kernel);
  opt("--recipe", a.recipe);
  opt("--check", a.check);
  opt("--shard", a.shard);
  opt("--junit", a.junit);
  opt("--json", a.json);
  opt("--markdown", a.markdown);
  opt("--tolerances", a.tolerances);
  for (const auto& p : a.plugins) opt("--plugin", p);
  opt("--jobs", "1");
  opt("--reruns", std::to_string(a.reruns));
  opt("--isolate-worker", std::to_string(index));
  if (a.quiet) v.push_back("--quiet");
  if (resume) v.push_back("--resume");
  return v;
}

// The in-flight markers ({"inflight": <row>, "t": ...}) from `offset` on with no result after them.
std::vector<nlohmann::json> dangling_markers(const std::filesystem::path& journal, std::uintmax_t offset) {
  std::ifstream in(journal);
  in.seekg(static_cast<std::streamoff>(offset));
  std::vector<nlohmann::json> open;
  for (std::string line; std::getline(in, line);) {
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const std::exception&) {
      continue;  // cut short by the death
    }
    if (!j.is_object()) continue;
    if (j.contains("inflight")) {
      open.push_back(j);
    } else if (j.contains("case")) {
      std::erase_if(open, [&](const nlohmann::json& m) { return m["inflight"].value("case", "") == j.value("case", "?"); });
    }
  }
  return open;
}

void append_lines(const std::filesystem::path& journal, const std::string& lines) {
  std::FILE* f = std::fopen(journal.c_str(), "a");
  if (!f) throw Error("gate --isolate: journal '" + journal.string() + "' cannot be opened for writing");
  std::fputs(lines.c_str(), f);
  std::fclose(f);
}

// A dead worker may have left half a line: the next line must start on its own.
void end_last_line(const std::filesystem::path& journal) {
  std::ifstream in(journal, std::ios::binary | std::ios::ate);
  if (!in || in.tellg() <= 0) return;
  in.seekg(-1, std::ios::end);
  if (in.get() != '\n') append_lines(journal, "\n");
}

// --isolate: run the gate in worker processes until one finishes; a worker that dies or hangs
// inside a check gets that check's fault row, and a fresh worker resumes from the journal. The
// last worker writes the reports (meta.workers from the journal's worker lines); its exit code is
// the gate's.
int supervise(const GateArgs& a, const std::string& cases, const std::string& profile, bool qualify) {
  namespace fs = std::filesystem;
  const fs::path journal = fs::path(a.out) / "results.jsonl";
  bool resume = a.resume;
  for (int n = 1;; ++n) {
    if (n > kMaxWorkers) {
      std::fprintf(stderr,
                   "gate --isolate: error: %d worker processes ended inside a check; giving up (their fault rows are in %s; "
                   "`--isolate --resume` goes on from there)\n",
                   kMaxWorkers, journal.c_str());
      return 1;
    }
    std::error_code ec;
    std::uintmax_t offset = 0;
    if (resume) {
      end_last_line(journal);
      offset = fs::exists(journal, ec) ? fs::file_size(journal, ec) : 0;
      if (ec) offset = 0;
    }
    const auto args = worker_argv(a, cases, profile, qualify, n, resume);
    std::vector<char*> argv;
    for (const auto& s : args) argv.push_back(const_cast<char*>(s.c_str()));
    argv.push_back(nullptr);
    std::fflush(nullptr);
    const pid_t parent = ::getpid();
    const pid_t pid = ::fork();
    if (pid < 0) throw Error(std::string("gate --isolate: fork: ") + std::strerror(errno));
    if (pid == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // no orphaned worker when the supervisor is killed
      if (::getppid() != parent) ::_exit(127);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    // Wait; with --case-timeout, kill the worker when the journal has not grown for that long
    // (a marker line opens every check and a result line closes it).
    int st = 0;
    bool killed = false;
    std::uintmax_t size = offset;
    auto progress = std::chrono::steady_clock::now();
    for (;;) {
      const pid_t r = ::waitpid(pid, &st, WNOHANG);
      if (r == pid) break;
      if (r < 0 && errno != EINTR) throw Error(std::string("gate --isolate: waitpid: ") + std::strerror(errno));
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      if (a.case_timeout <= 0 || killed) continue;
      const auto now = std::chrono::steady_clock::now();
      const auto s = fs::exists(journal, ec) ? fs::file_size(journal, ec) : 0;
      if (s != size) {
        size = s;
        progress = now;
      } else if (std::chrono::duration<double>(now - progress).count() > a.case_timeout) {
        ::kill(pid, SIGKILL);
        killed = true;
      }
    }
    std::string ended, cause;
    if (killed) {
      ended = fmt::format("killed: no progress within {:g} s (hang)", a.case_timeout);
      cause = fmt::format("no progress within {:g} s (hang): worker process {} (pid {}) killed", a.case_timeout, n, pid);
    } else if (WIFSIGNALED(st)) {
      const int sig = WTERMSIG(st);
      if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP) {  // stopped from outside, not by its kernel
        std::fprintf(stderr, "gate --isolate: worker process %d (pid %d) was stopped by %s; stopping\n", n, pid,
                     signal_name(sig).c_str());
        return 128 + sig;
      }
      ended = "died (" + signal_name(sig) + ")";
      cause = fmt::format("worker process {} (pid {}) died ({}: {}) during this check", n, pid, signal_name(sig), strsignal(sig));
    } else {
      const int code = WEXITSTATUS(st);
      if (dangling_markers(journal, offset).empty()) {
        if (code != kWorkerRestart) return code;  // finished: its reports are the gate's (or an input error)
        append_lines(journal, nlohmann::json{{"worker_end", {{"pid", pid}, {"ended", "exited after a fault row (a fresh "
                                                                                       "process for the next case)"}}}}
                                      .dump() +
                                  "\n");
        resume = true;
        continue;
      }
      ended = fmt::format("exited with code {} during a check", code);
      cause = fmt::format("worker process {} (pid {}) exited with code {} during this check", n, pid, code);
    }
    const auto open = dangling_markers(journal, offset);
    if (open.empty()) {
      std::fprintf(stderr,
                   "gate --isolate: error: worker process %d (pid %d) %s outside any check (loading, expanding the cases or "
                   "writing the reports); giving up\n",
                   n, pid, ended.c_str());
      return 1;
    }
    end_last_line(journal);
    std::string lines;
    for (const auto& m : open) {
      cf::Result r = cf::result_from_json(m["inflight"]);
      r.outcome = {cf::Verdict::fault, fmt::format("kernel {} faulted on {}: {}", r.kernel, r.problem, cause),
                   {{"worker", n}, {"pid", pid}, {"ended", ended}}};
      r.seconds = std::max(0.0, unix_now() - m.value("t", unix_now()));
      lines += cf::to_json(r).dump() + "\n";
      std::fprintf(stderr, "gate --isolate: worker process %d (pid %d) %s in %s; fault row written, going on in a fresh worker\n",
                   n, pid, ended.c_str(), r.descriptor.c_str());
    }
    lines += nlohmann::json{{"worker_end", {{"pid", pid}, {"ended", ended}}}}.dump() + "\n";
    append_lines(journal, lines);
    resume = true;
  }
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
  if (a.case_timeout > 0 && !a.isolate && a.isolate_worker == 0)
    throw Error("--case-timeout needs --isolate (a hang can only be stopped in a worker process)");
  if (a.isolate && a.isolate_worker == 0) return supervise(a, cases, profile, qualify);
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
  o.isolate_worker = a.isolate_worker;
  o.check.determinism_runs = a.reruns;
  const std::filesystem::path out = a.out;
  o.journal = out / "results.jsonl";
  Progress progress(a.quiet, run_flags);
  o.on_result = [&](const cf::Result& r, std::size_t d, std::size_t t) { progress(r, d, t); };
  auto rep = cf::run_gate(o);
  if (rep.stopped) return kWorkerRestart;  // a fault row: the supervisor goes on in a fresh worker

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
