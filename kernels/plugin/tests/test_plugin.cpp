// The plugin ABI end to end: every loader error path (one line each, nothing registered), the
// example plugin's kernels against closed forms and through the gate on the smoke set, the
// faulty plugin's dropped KV tile caught exactly where a row spans more than one tile, a kernel
// that reports failure, and `attest gate/run --plugin` on the command line.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "attest/testing/run_cli.hpp"
#include "attest/testing/temp_dir.hpp"
#include "attest/conformance/gate.hpp"
#include "attest/kernels/kernel.hpp"
#include "attest/kernels/plugin_loader.hpp"
#include "attest/plugin.h"

namespace attest::kernels {
namespace {

namespace cf = attest::conformance;
namespace fs = std::filesystem;

std::string bad(const char* which) { return std::string(ATTEST_BAD_PLUGIN_DIR) + "/attest_bad_plugin_" + which + ".so"; }

std::string load_error(const std::string& path) {
  try {
    load_plugin(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "(loaded)";
}

void expect_error(const std::string& path, const std::string& needle) {
  const std::string e = load_error(path);
  EXPECT_NE(e.find("plugin '" + path + "'"), std::string::npos) << e;  // names the file
  EXPECT_NE(e.find(needle), std::string::npos) << e;
  EXPECT_EQ(e.find('\n'), std::string::npos) << "not one line: " << e;
}

TEST(PluginLoader, MissingFile) { expect_error("/nonexistent/attest_plugin.so", ": no such file"); }

TEST(PluginLoader, NotASharedLibrary) {
  const attest::testing::TempDir dir("plugin");
  const fs::path p = dir / "attest_not_a_plugin.so";
  std::ofstream(p) << "not an ELF file\n";
  expect_error(p.string(), ": cannot load: ");
}

TEST(PluginLoader, MissingSymbol) { expect_error(bad("no_symbol"), ": no symbol attest_plugin_query"); }

TEST(PluginLoader, WrongVersion) {
  expect_error(bad("wrong_version"), ": built for attest plugin ABI version 2, this attest speaks version 1");
}

TEST(PluginLoader, InfoStructTooSmall) {
  expect_error(bad("small_info"), ": attest_plugin_info.struct_size is 8 bytes, ABI version 1 needs at least " +
                                      std::to_string(sizeof(attest_plugin_info)));
}

TEST(PluginLoader, KernelStructTooSmall) {
  expect_error(bad("small_kernel"), " kernel 0: attest_plugin_kernel.struct_size is 16 bytes, ABI version 1 needs at least " +
                                        std::to_string(ATTEST_PLUGIN_KERNEL_V1_MIN_SIZE));
}

// declares and row_align were appended to version 1: a kernel struct of the earlier size still
// loads, and the declarations its static struct holds past struct_size are not read.
TEST(PluginLoader, KernelStructOfTheEarlierVersionOneSizeLoads) {
  static_assert(ATTEST_PLUGIN_KERNEL_V1_MIN_SIZE + 2 * sizeof(std::uint32_t) + sizeof(const char*) ==
                sizeof(attest_plugin_kernel));
  const auto lp = load_plugin(bad("old_size"));
  ASSERT_EQ(lp.kernels, std::vector<std::string>{"plugin.bad_old_size.k"});
  const auto c = Registry::instance().find("plugin.bad_old_size.k")->capabilities();
  EXPECT_FALSE(c.ftz);
  EXPECT_TRUE(c.causal_cross);
  EXPECT_EQ(c.row_align, 1);
}

TEST(PluginLoader, AppendedDeclarationsMapIntoCapabilities) {
  const auto lp = load_plugin(bad("declares"));
  const Kernel& k = *Registry::instance().find("plugin.bad_declares.k");
  const auto c = k.capabilities();
  EXPECT_TRUE(c.ftz);
  EXPECT_FALSE(c.causal_cross);
  EXPECT_EQ(c.row_align, 8);
  const Recipe r = parse_recipe("f32");
  EXPECT_TRUE(k.supports(parse_problem("b1h1s8d16"), r));
  // bad_declares declares bshd only and no cross attention; row_align decides on the head dim.
  const auto st = k.supports(parse_problem("b1h1s8d12"), r);
  EXPECT_EQ(st.reason(), "row stride of 12 elements is not a multiple of the declared row_align 8");
  EXPECT_FALSE(declared_support(k, parse_problem("b1h1s8d12"), r));
}

TEST(PluginLoader, QueryRefusesTheHost) { expect_error(bad("refuses"), ": attest_plugin_query(1) returned NULL"); }

TEST(PluginLoader, UnparsableRecipe) {
  expect_error(bad("bad_recipe"), " kernel k: recipes[1]: ");
  EXPECT_EQ(Registry::instance().find("plugin.bad_bad_recipe.k"), nullptr);
}

TEST(PluginLoader, DuplicateKernelRegistersNothing) {
  expect_error(bad("dup_kernel"), ": kernel plugin.bad_dup_kernel.k is already registered");
  EXPECT_EQ(Registry::instance().find("plugin.bad_dup_kernel.k"), nullptr);  // all or nothing
}

TEST(PluginLoader, LoadsTheExampleOnce) {
  const auto a = load_plugin(ATTEST_EXAMPLE_PLUGIN);
  EXPECT_EQ(a.name, "example");
  EXPECT_EQ(a.version, "1.0");
  EXPECT_EQ(a.kernels, (std::vector<std::string>{"plugin.example.online_f32", "plugin.example.online_f64"}));
  const auto b = load_plugin(ATTEST_EXAMPLE_PLUGIN);  // same file again: no duplicate registration
  EXPECT_EQ(b.kernels, a.kernels);
  const Kernel* k = Registry::instance().find("plugin.example.online_f32");
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(k->backend(), "plugin:cpu");
  EXPECT_EQ(k->recipes(), std::vector<std::string>{"f32"});
  EXPECT_EQ(k->configs(), std::vector<std::string>{""});
  const Capabilities c = k->capabilities();
  EXPECT_TRUE(c.head_dims.empty());
  EXPECT_EQ(c.masks.size(), 3u);
  EXPECT_EQ(c.layouts.size(), 4u);
  EXPECT_TRUE(c.gqa && c.cross && c.ragged && c.head_dim_v && c.lse && c.deterministic);
  EXPECT_FALSE(c.bitwise || c.graph_capturable);
  // The capabilities refuse through the registry's rules; the plugin's own supports() adds its limit.
  EXPECT_EQ(k->supports(parse_problem("b1h1s8d64"), parse_recipe("bf16")).reason(),
            "recipe bf16 is not implemented by plugin.example.online_f32");
  EXPECT_EQ(k->supports(parse_problem("b1h1s8d64v1024"), parse_recipe("f32")).reason(),
            "head_dim_v 1024 exceeds this kernel's accumulator (512)");
  EXPECT_TRUE(k->supports(parse_problem("b1h1s8d64v512"), parse_recipe("f32")));
}

// Closed form: K = 0 makes every logit 0, so each row averages the V rows it sees. With
// v[j][d] = j + d (small integers: every sum is exact in float) a row seeing keys [0, hi) gives
// out[d] = (hi - 1) / 2 + d exactly and lse = log(hi).
struct ClosedForm {
  Problem p;
  Tensor q, k, v, out, lse;
  explicit ClosedForm(const std::string& problem) : p(parse_problem(problem)) {
    q = Tensor(DType::f32, {1, p.seqlen_q, 1, p.head_dim});
    k = Tensor(DType::f32, {1, p.seqlen_kv, 1, p.head_dim});
    v = Tensor(DType::f32, {1, p.seqlen_kv, 1, p.head_dim_v});
    out = Tensor(DType::f32, {1, p.seqlen_q, 1, p.head_dim_v});
    lse = Tensor(DType::f32, {1, 1, p.seqlen_q});
    for (std::int64_t i = 0; i < q.numel(); ++i) q.data<float>()[i] = static_cast<float>(i % 7) - 3.0f;
    for (std::int64_t j = 0; j < p.seqlen_kv; ++j)
      for (std::int64_t d = 0; d < p.head_dim_v; ++d) v.data<float>()[j * p.head_dim_v + d] = static_cast<float>(j + d);
  }
  void run(const std::string& kernel) {
    Kernel* kn = Registry::instance().find(kernel);
    ASSERT_NE(kn, nullptr) << kernel;
    const Recipe r = parse_recipe("f32");
    kn->run(Args{p, r, q, k, v, out, &lse, ""});
  }
};

TEST(ExamplePlugin, AveragesWhatEachRowSees) {
  load_plugin(ATTEST_EXAMPLE_PLUGIN);
  for (const char* kernel : {"plugin.example.online_f32", "plugin.example.online_f64"}) {
    for (const char* problem : {"b1h1s5t200d8v4", "b1h1s130t130d8v4:mask=causal_tl", "b1h1s3t150d8v4:mask=causal_br"}) {
      ClosedForm c(problem);
      c.run(kernel);
      for (std::int64_t i = 0; i < c.p.seqlen_q; ++i) {
        const std::int64_t hi = c.p.visible_keys(0, i);
        for (std::int64_t d = 0; d < c.p.head_dim_v; ++d)
          EXPECT_EQ(c.out.data<float>()[i * c.p.head_dim_v + d], static_cast<float>(hi - 1) / 2 + static_cast<float>(d))
              << kernel << " " << problem << " row " << i;
        EXPECT_NEAR(c.lse.data<float>()[i], std::log(static_cast<double>(hi)), 4e-7) << kernel << " " << problem << " row " << i;
      }
    }
  }
}

TEST(FaultyPlugin, DropsTheLastKvTile) {
  load_plugin(ATTEST_FAULTY_PLUGIN);
  ClosedForm c("b1h1s2t200d8v4");  // tiles [0,64) [64,128) [128,192) [192,200): the last 8 keys go missing
  c.run("plugin.faulty.online_f32_drop_last_tile");
  EXPECT_EQ(c.out.data<float>()[0], 95.5f);  // mean of 0..191, not of 0..199
}

// The cpu profile's smoke set with the plugin's kernels joined to the profile, as
// `attest gate --plugin` does.
cf::GateReport gate(const LoadedPlugin& plugin, const std::string& kernels, const std::string& checks = "") {
  cf::GateOptions o;
  o.profile = cf::Profile::load("cpu");
  for (const auto& k : plugin.kernels) o.profile.kernels.push_back(k);
  o.cases = cf::CaseFile::load("smoke");
  o.selection = {kernels, "", checks};
  o.jobs = 2;
  return cf::run_gate(o);
}

TEST(ExamplePlugin, PassesTheGateOnTheSmokeSet) {
  const auto rep = gate(load_plugin(ATTEST_EXAMPLE_PLUGIN), "plugin.example.*");
  EXPECT_EQ(rep.exit_code(), 0);
  std::map<std::string, int> accuracy;
  std::map<std::string, std::set<std::string>> passed;
  for (const auto& r : rep.results) {
    EXPECT_TRUE(cf::verdict_ok(r.outcome.verdict)) << r.descriptor << ": " << r.outcome.reason;
    if (r.check == "accuracy") accuracy[r.kernel] += r.outcome.verdict == cf::Verdict::passed;
    if (r.outcome.verdict == cf::Verdict::passed) passed[r.kernel].insert(r.check);
  }
  // Every host-side check ran and passed somewhere (bitwise and call_path do not apply: no
  // bitwise contract, one call path; device_* and graph_* need a device-memory kernel).
  const std::set<std::string> every{"accuracy", "determinism", "layout",      "poison",    "canary",   "churn",
                                    "split_kv", "masked_rows", "nonfinite", "subnormal", "refusal"};
  for (const char* k : {"plugin.example.online_f32", "plugin.example.online_f64"})
    for (const auto& c : every) EXPECT_TRUE(passed[k].contains(c)) << k << " never passed " << c;
  // Every smoke template applies to f32 and runs accuracy: 6 + 3 + 4 distribution groups.
  EXPECT_EQ(accuracy["plugin.example.online_f32"], 13);
  EXPECT_EQ(accuracy["plugin.example.online_f64"], 13);
}

// The accuracy check fails the faulty kernel on exactly the cases where the dropped tile carries
// weight: some row sees more than one 64-key tile, and the fill is not one whose softmax mass
// sits on a key of the first tile (sink: token 0 dominates every row; underflow: logits of
// +-1000 leave one key per row, and the dropped keys' weights are below float resolution).
TEST(FaultyPlugin, TheGateCatchesTheDroppedTileExactlyWhereItMatters) {
  const auto rep = gate(load_plugin(ATTEST_FAULTY_PLUGIN), "plugin.faulty.*", "accuracy");
  EXPECT_EQ(rep.exit_code(), 1);
  int failed = 0, passed = 0;
  for (const auto& r : rep.results) {
    const Problem p = parse_problem(r.problem);
    bool spans = false;
    for (std::int64_t b = 0; b < p.batch; ++b)
      for (std::int64_t i = 0; i < p.len_q(b); ++i) spans = spans || p.visible_keys(b, i) > 64;
    const bool weighty = spans && r.dist != "sink" && r.dist != "underflow";
    EXPECT_EQ(r.outcome.verdict, weighty ? cf::Verdict::failed : cf::Verdict::passed) << r.descriptor << ": " << r.outcome.reason;
    (weighty ? failed : passed) += 1;
  }
  EXPECT_EQ(failed, 8);  // 13 smoke groups: 3 without a second tile, sink and underflow
  EXPECT_EQ(passed, 5);
}

TEST(PluginLoader, KernelFailureIsAnErrorVerdictWithItsMessage) {
  const auto lp = load_plugin(bad("failing"));
  ASSERT_EQ(lp.kernels, std::vector<std::string>{"plugin.bad_failing.k"});
  const auto res = cf::run_cases({cf::parse_case("kernel=plugin.bad_failing.k recipe=f32 problem=b1h1s8d16 dist=normal seed=1 "
                                                 "check=accuracy")},
                                 cf::ToleranceTable::builtin(), {});
  ASSERT_EQ(res.size(), 1u);
  EXPECT_EQ(res[0].outcome.verdict, cf::Verdict::error);
  EXPECT_NE(res[0].outcome.reason.find("plugin kernel plugin.bad_failing.k (" + bad("failing") +
                                       ") reported failure 2: device ran out of bananas"),
            std::string::npos)
      << res[0].outcome.reason;
  EXPECT_EQ(res[0].outcome.reason.find("second line"), std::string::npos) << res[0].outcome.reason;
}

// ATTEST_PLUGIN_RUN_FAULT: the case's verdict is fault (not error), with the kernel's text.
TEST(PluginLoader, RunFaultCodeIsAFaultVerdict) {
  load_plugin(bad("faults"));
  const auto res = cf::run_cases({cf::parse_case("kernel=plugin.bad_faults.k recipe=f32 problem=b1h1s8d16 dist=normal seed=1 "
                                                 "check=accuracy")},
                                 cf::ToleranceTable::builtin(), {});
  ASSERT_EQ(res.size(), 1u);
  EXPECT_EQ(res[0].outcome.verdict, cf::Verdict::fault);
  EXPECT_NE(res[0].outcome.reason.find("kernel plugin.bad_faults.k faulted on b1h1s8d16: CUDA error: misaligned address"),
            std::string::npos)
      << res[0].outcome.reason;
}

// ATTEST_PLUGIN_RUN_REFUSED: one refusal is one failed refusal row; every other check of the
// case is UNSUPPORTED pointing at it, and the kernel is not called again.
TEST(PluginLoader, RunRefusedCodeIsOneFailedRefusalRow) {
  load_plugin(bad("call_refuses"));
  const auto res = cf::run_cases({cf::parse_case("kernel=plugin.bad_call_refuses.k recipe=f32 problem=b1h1s8d16 "
                                                 "dist=normal seed=1")},
                                 cf::ToleranceTable::builtin(), {});
  std::size_t failed = 0;
  for (const auto& r : res) {
    if (r.check == "refusal") {
      EXPECT_EQ(r.outcome.verdict, cf::Verdict::failed);
      EXPECT_EQ(r.outcome.reason,
                "refuses at call time a case inside its declared capabilities: No available kernel. Aborting execution.");
      ++failed;
    } else {
      EXPECT_EQ(r.outcome.verdict, cf::Verdict::unsupported) << r.check << ": " << r.outcome.reason;
    }
  }
  EXPECT_EQ(failed, 1u);
  const auto first = std::find_if(res.begin(), res.end(), [](const cf::Result& r) { return r.check == "accuracy"; });
  ASSERT_NE(first, res.end());
  EXPECT_EQ(first->outcome.reason,
            "refused at call time: No available kernel. Aborting execution. (judged by the refusal row)");
}

// --- the command line ---
using Run = attest::testing::CliRun;
Run sh(const std::string& args) { return attest::testing::run_cli(args); }

class PluginCli : public ::testing::Test {
 protected:
  void SetUp() override {
    std::ofstream(dir_ / "mini.cases") << "kernel=* recipe=* problem=b1h2s40t150d32 dist=normal seed=1 check=accuracy,poison\n"
                                          "kernel=* recipe=* problem=b2h2s33d16:mask=causal_tl dist=sink seed=2 check=accuracy,canary\n";
  }
  std::string d(const char* sub) const { return (dir_ / sub).string(); }
  // The gate on the plugin that refuses everything it declares, with `extra` flags.
  attest::testing::CliRun gate_refuse_all(const std::string& extra) const {
    return sh("gate --plugin " + bad("refuse_all") + " --kernel 'plugin.bad_refuse_all.*' --cases " + d("mini.cases") + extra +
              " --out " + d("o") + " --quiet");
  }
  attest::testing::TempDir dir_{"plugin_cli"};
};

TEST_F(PluginCli, ExamplePassesAndFaultyFailsWithARunnableReproLine) {
  auto r = sh("gate --plugin " + std::string(ATTEST_EXAMPLE_PLUGIN) + " --plugin " + ATTEST_FAULTY_PLUGIN +
              " --kernel 'plugin.example.*' --cases " + d("mini.cases") + " --out " + d("ok") + " --quiet");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("plugin.example.online_f64"), std::string::npos) << r.out;

  r = sh("gate --plugin " + std::string(ATTEST_FAULTY_PLUGIN) + " --kernel 'plugin.*' --cases " + d("mini.cases") + " --out " +
         d("bad") + " --quiet");
  EXPECT_EQ(r.code, 1) << r.out;
  const std::string want = "attest run --plugin '" + std::string(ATTEST_FAULTY_PLUGIN) + "' 'kernel=plugin.faulty.";
  const auto at = r.out.find(want);
  ASSERT_NE(at, std::string::npos) << r.out;
  const std::string repro = r.out.substr(at + 11, r.out.find('\n', at) - at - 11);  // after "attest run "
  EXPECT_NE(repro.find("s40t150"), std::string::npos) << repro;  // only the case with a second tile fails
  EXPECT_EQ(r.out.find("s33d16"), std::string::npos) << r.out;
  const auto again = sh("run " + repro);
  EXPECT_EQ(again.code, 1) << again.out;
  EXPECT_NE(again.out.find("failed"), std::string::npos) << again.out;
}

// Coverage (docs/gate.md): a kernel that refuses everything it declares must not pass. Every
// refused case inside the declarations is a failure, and each declared check with no passing
// case fails the gate on its own.
TEST_F(PluginCli, RefuseAllKernelFailsTheGate) {
  const auto r = gate_refuse_all("");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("refuses a case inside its declared recipes and capabilities: not today"), std::string::npos) << r.out;
  // One refusal, one failed row: the refusal check (it joins every template) judges each case once,
  // the case's other checks are UNSUPPORTED pointing at it (issue 25: not one failure per check).
  EXPECT_NE(r.out.find("total 6 cases: 0 passed, 2 failed, 4 unsupported"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("failed plugin.bad_refuse_all.k f32 refusal: refuses a case inside its declared"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("first unsupported: refused inside its declarations: not today (judged by the refusal row)"),
            std::string::npos) << r.out;
  EXPECT_NE(r.out.find("plugin.bad_refuse_all.k: accuracy 0/2 poison 0/1 refusal- 2/2 canary 0/1"), std::string::npos) << r.out;
}

// A selection without the refusal check has no row to judge the refusal once: every selected
// check fails with it (a kernel that refuses what it declares never passes silently).
TEST_F(PluginCli, RefusalWithoutARefusalRowFailsEachSelectedCheck) {
  const auto r = gate_refuse_all(" --check accuracy");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("failed plugin.bad_refuse_all.k f32 accuracy: refuses a case inside its declared recipes and "
                       "capabilities: not today"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("judged by the refusal row"), std::string::npos) << r.out;
}

// The bad_failing kernel declares no causal_tl mask: selecting only causal cases judges
// nothing, and the declared checks' empty coverage fails the gate.
TEST_F(PluginCli, DeclaredCheckWithNothingJudgedFailsTheGate) {
  std::ofstream(d("causal.cases")) << "kernel=* recipe=* problem=b2h2s33d16:mask=causal_tl dist=sink seed=2 check=accuracy\n";
  const auto r = sh("gate --plugin " + bad("failing") + " --kernel 'plugin.bad_failing.*' --cases " + d("causal.cases") +
                    " --out " + d("o") + " --quiet");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("coverage: kernel plugin.bad_failing.k declares check accuracy but none of its 1 cases was judged "
                       "(first unsupported: mask causal_tl not supported)"),
            std::string::npos)
      << r.out;
}

TEST_F(PluginCli, EmptySelectionExitsTwoAndWritesNothing) {
  const auto r = sh("gate --plugin " + std::string(ATTEST_EXAMPLE_PLUGIN) + " --kernel 'plugin.nothing.*' --cases " +
                    d("mini.cases") + " --out " + d("o"));
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("matches no case"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find('\n'), r.out.size() - 1) << r.out;
  EXPECT_FALSE(fs::exists(d("o"))) << "nothing written on an input error";
}

// Provenance: the report names the tolerance table (source + hash) and the build's commit and
// dirty flag; qualify refuses QUALIFIED under a replaced table, whatever the verdicts.
TEST_F(PluginCli, ReportsRecordProvenanceAndQualifyRefusesAReplacedTable) {
  std::ifstream in(std::string(ATTEST_SOURCE_DIR) + "/conformance/tolerances.json");
  std::stringstream text;
  text << in.rdbuf();
  std::ofstream(d("tol.json")) << text.str();  // the same rows, from a file
  const std::string base = "--plugin " + std::string(ATTEST_EXAMPLE_PLUGIN) + " --kernel 'plugin.example.*' --cases " +
                           d("mini.cases") + " --profile cpu --quiet";
  const auto a = sh("gate " + base + " --out " + d("a"));
  ASSERT_EQ(a.code, 0) << a.out;
  const auto b = sh("qualify " + base + " --tolerances " + d("tol.json") + " --out " + d("b"));
  EXPECT_EQ(b.code, 1) << b.out;
  EXPECT_NE(b.out.find("qualify: refused: tolerance table " + d("tol.json") + " is not the built-in one"), std::string::npos)
      << b.out;
  EXPECT_NE(b.out.find("NOT QUALIFIED"), std::string::npos) << b.out;
  auto meta = [](const std::string& path) {
    std::ifstream f(path);
    return nlohmann::json::parse(f)["meta"];
  };
  const auto ma = meta(d("a") + "/gate.json"), mb = meta(d("b") + "/qualify.json");
  EXPECT_EQ(ma["tolerances"]["source"], "built-in");
  EXPECT_EQ(mb["tolerances"]["source"], d("tol.json"));
  // Same text, same hash: the hash identifies the rows, wherever they were read from.
  EXPECT_EQ(ma["tolerances"]["hash"], mb["tolerances"]["hash"]);
  EXPECT_EQ(ma["tolerances"]["hash"].get<std::string>().rfind("fnv1a64:", 0), 0u);
  EXPECT_TRUE(ma["dirty"].is_boolean());
  EXPECT_EQ(ma["commit"].get<std::string>().size(), 12u) << ma["commit"];
  EXPECT_EQ(ma["selection"]["kernel"], "plugin.example.*");
  std::ofstream(d("tol2.json")) << text.str() << "\n";  // one byte more: another hash
  const auto c = sh("gate " + base + " --tolerances " + d("tol2.json") + " --out " + d("c"));
  EXPECT_NE(meta(d("c") + "/gate.json")["tolerances"]["hash"], ma["tolerances"]["hash"]);
}

TEST_F(PluginCli, LoaderErrorsAreOneLineAndExitTwo) {
  for (const std::string& path : {std::string("/nonexistent/p.so"), bad("no_symbol"), bad("wrong_version")}) {
    const auto r = sh("gate --plugin " + path + " --cases " + d("mini.cases") + " --out " + d("o"));
    EXPECT_EQ(r.code, 2) << r.out;
    EXPECT_EQ(r.out.rfind("attest: error: plugin '" + path + "': ", 0), 0u) << r.out;
    EXPECT_EQ(r.out.find('\n'), r.out.size() - 1) << r.out;
    EXPECT_FALSE(fs::exists(d("o"))) << "nothing written on an input error";
  }
}

// --- fault containment: `attest gate --isolate` (docs/gate.md, "Fault containment") ---

std::string crash(const char* which) {
  return std::string(ATTEST_CRASH_PLUGIN_DIR) + "/attest_crash_plugin_" + which + ".so";
}

nlohmann::json read_json(const std::string& path) {
  std::ifstream f(path);
  return nlohmann::json::parse(f);
}

// The gate of a kernel that kills its process on one problem: one fault row for the check it
// died in (naming how), every other row valid, the rest of that case not run, and the report
// naming the two worker processes and what each ran.
void expect_one_contained_fault(const Run& r, const std::string& dir, const std::string& plugin, const std::string& cause) {
  EXPECT_EQ(r.code, 1) << r.out;
  const auto j = read_json(dir + "/gate.json");
  std::size_t faults = 0;
  for (const auto& row : j["results"]) {
    const std::string v = row["verdict"], reason = row["reason"], c = row["case"];
    if (v == "fault") {
      ++faults;
      EXPECT_NE(c.find("problem=b2h4k2s80t150d32:mask=causal_br"), std::string::npos) << c;
      EXPECT_EQ(row["check"], "accuracy") << c;  // the first check that calls the kernel
      EXPECT_NE(reason.find("kernel " + std::string(row["kernel"]) + " faulted on b2h4k2s80t150d32:mask=causal_br: "),
                std::string::npos) << reason;
      EXPECT_NE(reason.find(cause), std::string::npos) << reason;
      EXPECT_NE(reason.find("worker process 1 (pid "), std::string::npos) << reason;
      // The repro line of the row, as printed while the gate went on.
      EXPECT_NE(r.out.find("attest run --plugin '" + plugin + "' '" + c + "'"), std::string::npos) << r.out;
    } else {
      EXPECT_TRUE(v == "passed" || v == "unsupported") << c << ": " << v << ": " << reason;
      if (c.find("t150") != std::string::npos && v == "unsupported" && row["check"] != "bitwise") {
        EXPECT_EQ(reason, "not run: the kernel faulted earlier in this case (judged by the fault row of check accuracy)") << c;
      }
    }
  }
  EXPECT_EQ(faults, 1u);
  EXPECT_GT(j["counts"]["passed"].get<int>(), 50);
  const auto& w = j["meta"]["workers"];
  ASSERT_EQ(w.size(), 2u) << w.dump();
  EXPECT_NE(std::string(w[0]["ended"]).find(cause.substr(0, cause.find(' '))), std::string::npos) << w.dump();
  EXPECT_NE(std::string(w[0]["last"]).find("t150"), std::string::npos) << w.dump();  // the case it died in
  EXPECT_EQ(w[1]["ended"], "finished (wrote the reports)");
  EXPECT_NE(w[0]["pid"], w[1]["pid"]);
  EXPECT_EQ(w[0]["results"].get<std::size_t>() + w[1]["results"].get<std::size_t>(), j["results"].size());
  std::ifstream md(dir + "/gate.md");
  const std::string text((std::istreambuf_iterator<char>(md)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("Fault containment: 2 worker processes (--isolate): worker 1 (pid "), std::string::npos) << text;
  // The journal's worker lines and in-flight markers are no results for the report tools.
  const auto m = sh("report merge " + dir + "/results.jsonl --json " + dir + "/merged.json");
  EXPECT_EQ(m.code, 1) << m.out;  // merged fine; the merged report holds a fault
  EXPECT_EQ(read_json(dir + "/merged.json")["results"].size(), j["results"].size());
}

TEST_F(PluginCli, IsolateTurnsAnAbortIntoOneFaultRowAndGoesOnInAFreshWorker) {
  const auto r = sh("gate --plugin " + crash("abort") + " --kernel 'plugin.*' --cases smoke --isolate --quiet --out " + d("iso"));
  expect_one_contained_fault(r, d("iso"), crash("abort"), "died (SIGABRT: ");
}

TEST_F(PluginCli, IsolateKillsAHangAfterTheCaseTimeout) {
  const auto r = sh("gate --plugin " + crash("hang") + " --kernel 'plugin.*' --cases smoke --isolate --case-timeout 3 --quiet " +
                    "--out " + d("hang"));
  expect_one_contained_fault(r, d("hang"), crash("hang"), "no progress within 3 s (hang): ");
}

// An in-process fault (ATTEST_PLUGIN_RUN_FAULT: a sticky device error) ends its worker after the
// fault row, so the next case runs in a fresh process: one worker per faulting case, plus the last.
TEST_F(PluginCli, IsolateStartsAFreshWorkerAfterAnInProcessFault) {
  const auto r = sh("gate --plugin " + bad("faults") + " --kernel 'plugin.*' --cases " + d("mini.cases") +
                    " --isolate --quiet --out " + d("f"));
  EXPECT_EQ(r.code, 1) << r.out;
  const auto j = read_json(d("f") + "/gate.json");
  std::size_t faults = 0;
  for (const auto& row : j["results"]) {
    faults += row["verdict"] == "fault";
    EXPECT_TRUE(row["verdict"] == "fault" || row["verdict"] == "unsupported") << row.dump();
  }
  EXPECT_EQ(faults, 2u);  // one per case group
  const auto& w = j["meta"]["workers"];
  ASSERT_EQ(w.size(), 3u) << w.dump();
  EXPECT_EQ(w[0]["ended"], "exited after a fault row (a fresh process for the next case)");
  EXPECT_EQ(w[1]["ended"], "exited after a fault row (a fresh process for the next case)");
}

TEST_F(PluginCli, CaseTimeoutWithoutIsolateIsAUsageError) {
  const auto r = sh("gate --plugin " + crash("hang") + " --kernel 'plugin.*' --cases " + d("mini.cases") +
                    " --case-timeout 3 --out " + d("o"));
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("--case-timeout needs --isolate"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(d("o")));
}

}  // namespace
}  // namespace attest::kernels
