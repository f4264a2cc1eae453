// `attest bench` and `attest report` end to end on real (small) CPU reports: the diff of a gate
// run against a numerically changed kernel flags accuracy regressions and exits 1; a bench
// report against itself exits 0 and against a slowed copy exits 1; the shards of a gate merge
// into exactly the unsharded run; malformed input exits 2 and writes nothing.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "attest/testing/run_cli.hpp"
#include "attest/testing/temp_dir.hpp"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

using Run = attest::testing::CliRun;
Run sh(const std::string& args) { return attest::testing::run_cli(args); }

json read_json(const fs::path& p) {
  std::ifstream in(p);
  return json::parse(in);
}

class BenchCli : public ::testing::Test {
 protected:
  void SetUp() override {
    std::ofstream(dir_ / "mini.cases") << "kernel=* recipe=bf16 problem=b1h2s40t72d32 dist=normal seed=1-2 check=accuracy,bitwise\n"
                                          "kernel=* recipe=bf16 problem=b1h2s33d16:mask=causal_tl dist=sink seed=3 check=accuracy,poison\n";
    std::ofstream(dir_ / "tiny.shapes") << "# two small shapes\ntiny-self b1h2s96d32\ntiny-cross b1h2s96t40d32\n";
  }
  std::string d(const char* sub) const { return (dir_ / sub).string(); }
  attest::testing::TempDir dir_{"bench_cli"};
};

TEST_F(BenchCli, GateDiffFlagsANumericallyChangedKernel) {
  ASSERT_EQ(sh("gate --quiet --jobs 1 --cases " + d("mini.cases") + " --kernel cpu.tiled.bf16 --out " + d("base")).code, 0);
  // mutant.scale_off_1pct: the softmax scale 1% too large (kernels/cpu/mutants).
  const auto cand = sh("gate --quiet --jobs 1 --cases " + d("mini.cases") + " --kernel mutant.scale_off_1pct --out " + d("cand"));
  ASSERT_EQ(cand.code, 1) << cand.out;
  const auto same = sh("report diff " + d("base/gate.json") + " " + d("base/gate.json"));
  EXPECT_EQ(same.code, 0) << same.out;
  EXPECT_NE(same.out.find("no regression"), std::string::npos);
  // Without --pair the kernels differ: every case is one-sided, nothing is compared.
  const auto unpaired = sh("report diff " + d("base/gate.json") + " " + d("cand/gate.json"));
  EXPECT_EQ(unpaired.code, 0) << unpaired.out;
  EXPECT_NE(unpaired.out.find("Only in base (9)"), std::string::npos) << unpaired.out;
  const auto r = sh("report diff " + d("base/gate.json") + " " + d("cand/gate.json") +
                    " --pair cpu.tiled.bf16=mutant.scale_off_1pct --json " + d("diff.json") + " --markdown " + d("diff.md"));
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("REGRESSED"), std::string::npos);
  const auto j = read_json(d("diff.json"));
  // Every accuracy case and every bitwise case changed its verdict passed -> failed.
  std::size_t verdict_regressions = 0, rel_l2 = 0, normal_regressed = 0;
  for (const auto& v : j["verdicts"]) verdict_regressions += v["flag"] == "regression";
  EXPECT_GE(verdict_regressions, 2u);  // at least the two bitwise cases
  for (const auto& a : j["accuracy"])
    if (a["figure"] == "judgement.metrics.rel_l2") {
      ++rel_l2;
      // The floor of these cases is 0 (bf16 ordering moves nothing here), so the flag follows
      // the threshold alone. The sink fill (one dominant key per row) hides a 1% scale error.
      EXPECT_EQ(a["flag"] == "regression", a["ratio"].get<double>() > 1.25) << a.dump();
      normal_regressed += a["dist"] == "normal" && a["flag"] == "regression";
    }
  EXPECT_EQ(rel_l2, 3u);           // one per accuracy case
  EXPECT_EQ(normal_regressed, 2u);  // both normal-fill cases
  EXPECT_TRUE(j["only_base"].empty());
  EXPECT_TRUE(fs::exists(d("diff.md")));
  // The diff renders as a page.
  EXPECT_EQ(sh("report html " + d("diff.json") + " -o " + d("diff.html")).code, 0);
  std::stringstream html;
  html << std::ifstream(d("diff.html")).rdbuf();
  EXPECT_NE(html.str().find("<svg"), std::string::npos);
}

TEST_F(BenchCli, BenchReportDiffsAgainstItselfAndASlowedCopy) {
  const auto b = sh("bench --quiet --kernel cpu.tiled.bf16 --shapes " + d("tiny.shapes") +
                    " --repeat 3 --warmup 1 --min-sample-ms 0.5 --with-preprocessing --json " + d("b.json") + " --markdown " + d("b.md"));
  ASSERT_EQ(b.code, 0) << b.out;
  auto j = read_json(d("b.json"));
  ASSERT_EQ(j["kind"], "bench");
  ASSERT_EQ(j["results"].size(), 2u);  // bf16 has no quantizer (plain casts)
  for (const auto& r : j["results"]) {
    EXPECT_EQ(r["status"], "timed") << r.dump();
    EXPECT_EQ(r["timer"], "host");
    EXPECT_EQ(r["samples_ms"].size(), 3u);
    // TFLOP/s from 4 B H S T D (non-causal, D == Dv) and the median.
    const double flops = r["shape"] == "tiny-self" ? 4.0 * 2 * 96 * 96 * 32 : 4.0 * 2 * 96 * 40 * 32;
    EXPECT_DOUBLE_EQ(r["flops"].get<double>(), flops);
    EXPECT_NEAR(r["tflops"].get<double>(), flops / (r["median_ms"].get<double>() * 1e-3) * 1e-12, 1e-12);
    EXPECT_GE(r["buffers"].get<int>(), 1);
  }
  EXPECT_NE(b.out.find("| kernel | recipe | Q/K | V | O | TFLOP/s |"), std::string::npos) << b.out;
  const auto self = sh("report diff " + d("b.json") + " " + d("b.json"));
  EXPECT_EQ(self.code, 0) << self.out;
  EXPECT_NE(self.out.find("| 1.000 |"), std::string::npos) << self.out;
  // A slowed copy of the real report: every time x1.5 regresses. The spreads of both are pinned
  // to 10% (on a loaded host a 3-sample IQR can be anything, and the flag must not depend on it):
  // 0.5 > 10% threshold and > 0.1 + 0.1 combined spread.
  for (auto& r : j["results"]) r["spread"] = 0.1;
  json pinned = j;
  std::ofstream(d("pinned.json")) << pinned.dump(2);
  for (auto& r : j["results"])
    for (const char* k : {"median_ms", "q1_ms", "q3_ms", "min_ms", "max_ms"}) r[k] = r[k].get<double>() * 1.5;
  std::ofstream(d("slow.json")) << j.dump(2);
  const auto slow = sh("report diff " + d("pinned.json") + " " + d("slow.json") + " --perf-threshold 10%");
  EXPECT_EQ(slow.code, 1) << slow.out;
  EXPECT_NE(slow.out.find("REGRESSED (2 regressions)"), std::string::npos) << slow.out;
  // ... unless the threshold is above 50%, or the spreads are (0.3 + 0.3 > 0.5: noise).
  EXPECT_EQ(sh("report diff " + d("pinned.json") + " " + d("slow.json") + " --perf-threshold 60").code, 0);
  for (auto* doc : {&pinned, &j})
    for (auto& r : (*doc)["results"]) r["spread"] = 0.3;
  std::ofstream(d("noisy-base.json")) << pinned.dump(2);
  std::ofstream(d("noisy-slow.json")) << j.dump(2);
  const auto noisy = sh("report diff " + d("noisy-base.json") + " " + d("noisy-slow.json"));
  EXPECT_EQ(noisy.code, 0) << noisy.out;
  EXPECT_NE(noisy.out.find("| noise |"), std::string::npos) << noisy.out;
  EXPECT_EQ(sh("report html " + d("b.json") + " -o " + d("b.html")).code, 0);
}

TEST_F(BenchCli, MergeOfShardsEqualsTheUnshardedRun) {
  const std::string common = "gate --quiet --jobs 1 --cases " + d("mini.cases") + " --kernel 'cpu.tiled.bf16'";
  ASSERT_EQ(sh(common + " --out " + d("all")).code, 0);
  for (int i = 0; i < 3; ++i)
    ASSERT_EQ(sh(common + " --shard " + std::to_string(i) + "/3 --out " + d(("s" + std::to_string(i)).c_str())).code, 0);
  const auto m = sh("report merge " + d("s2/gate.json") + " " + d("s0/gate.json") + " " + d("s1/gate.json") + " --json " + d("m.json"));
  ASSERT_EQ(m.code, 0) << m.out;
  auto strip = [](json j) {
    for (auto& r : j["results"]) r.erase("seconds");  // timings differ run to run
    return j;
  };
  const auto all = strip(read_json(d("all/gate.json"))), merged = strip(read_json(d("m.json")));
  EXPECT_EQ(merged["results"], all["results"]);
  EXPECT_EQ(merged["counts"], all["counts"]);
  EXPECT_EQ(merged["exit_code"], all["exit_code"]);
  EXPECT_EQ(all["results"].size(), 9u);  // 3 groups: 2 x (accuracy, bitwise) + (accuracy, poison), + refusal each
  // The journals (no shard in them) merge by concatenation: the same set of cases.
  const auto mj = sh("report merge " + d("s0/results.jsonl") + " " + d("s1/results.jsonl") + " " + d("s2/results.jsonl") + " --json " +
                     d("mj.json"));
  ASSERT_EQ(mj.code, 0) << mj.out;
  EXPECT_EQ(read_json(d("mj.json"))["results"].size(), 9u);
  // A missing shard is an input error.
  const auto missing = sh("report merge " + d("s0/gate.json") + " " + d("s1/gate.json") + " --json " + d("x.json"));
  EXPECT_EQ(missing.code, 2) << missing.out;
  EXPECT_NE(missing.out.find("shard 2/3 is missing"), std::string::npos);
  EXPECT_FALSE(fs::exists(d("x.json")));
}

TEST_F(BenchCli, MalformedInputExitsTwoAndWritesNothing) {
  std::ofstream(d("cut.json")) << "{\"kind\": \"bench\", \"results\": [";
  std::ofstream(d("b.json")) << R"({"kind": "bench", "meta": {}, "results": []})";
  std::ofstream(d("g.json")) << R"({"meta": {}, "counts": {}, "results": []})";
  auto r = sh("report diff " + d("cut.json") + " " + d("b.json") + " --json " + d("o.json"));
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("cut.json:1: not JSON"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(d("o.json")));
  r = sh("report diff " + d("b.json") + " " + d("g.json"));
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("is a bench report"), std::string::npos) << r.out;
  EXPECT_EQ(sh("report diff " + d("b.json") + " " + d("nope.json")).code, 2);
  EXPECT_EQ(sh("report diff " + d("b.json") + " " + d("b.json") + " --perf-threshold abc").code, 2);
  EXPECT_EQ(sh("report diff " + d("b.json") + " " + d("b.json") + " --pair nokernel").code, 2);
  EXPECT_EQ(sh("report html " + d("cut.json") + " -o " + d("h.html")).code, 2);
  EXPECT_FALSE(fs::exists(d("h.html")));
  std::ofstream(d("bad.shapes")) << "x b1h3k2s64d64\n";  // heads_q % heads_kv != 0
  r = sh("bench --shapes " + d("bad.shapes"));
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("bad.shapes:1: shape 'x'"), std::string::npos) << r.out;
  EXPECT_EQ(sh("bench --kernel 'nothing*' --shapes " + d("tiny.shapes")).code, 2);
}

}  // namespace
