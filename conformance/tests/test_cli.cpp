// The `attest` CLI end to end: exit codes (0 pass, 1 fail, 2 usage/input), a planted failure's
// repro line reproducing the failure through `attest run`, --resume, sharding, report files.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "attest/testing/run_cli.hpp"
#include "attest/testing/temp_dir.hpp"

namespace {

namespace fs = std::filesystem;

using Run = attest::testing::CliRun;
Run sh(const std::string& args) { return attest::testing::run_cli(args); }

class Cli : public ::testing::Test {
 protected:
  void SetUp() override {
    // A small case file: two groups, a handful of checks.
    std::ofstream(dir_ / "mini.cases") << "kernel=* recipe=* problem=b1h2s40t72d32 dist=normal seed=1 check=bitwise,accuracy,poison\n"
                                          "kernel=* recipe=* problem=b2h2s33d16:mask=causal_tl dist=sink seed=2 check=bitwise,canary\n";
  }
  std::string d(const char* sub) const { return (dir_ / sub).string(); }
  attest::testing::TempDir dir_{"cli"};
};

std::size_t lines(const fs::path& p) {
  std::ifstream in(p);
  std::size_t n = 0;
  for (std::string l; std::getline(in, l);) n += !l.empty();
  return n;
}

TEST_F(Cli, PassingGateExitsZeroAndWritesEveryReport) {
  const auto r = sh("gate --cases " + d("mini.cases") + " --kernel 'cpu.tiled.bf16' --out " + d("o") + " --junit " +
                    d("j.xml") + " --json " + d("r.json") + " --markdown " + d("r.md"));
  EXPECT_EQ(r.code, 0) << r.out;
  // 2 groups whose templates list their checks (5 rows) + the refusal row each template gains.
  EXPECT_NE(r.out.find("total 7 cases: 7 passed"), std::string::npos) << r.out;
  for (const char* f : {"o/results.jsonl", "o/gate.md", "o/gate.json", "o/junit.xml", "o/summary.txt", "j.xml", "r.json", "r.md"})
    EXPECT_TRUE(fs::exists(dir_ / f)) << f;
  EXPECT_EQ(lines(dir_ / "o/results.jsonl"), 7u);
  std::ifstream in(dir_ / "r.json");
  const auto j = nlohmann::json::parse(in);
  EXPECT_EQ(j["counts"]["passed"], 7);
  EXPECT_EQ(j["meta"]["profile"], "cpu");
}

TEST_F(Cli, PlantedFailureExitsOneAndItsReproLineReproducesIt) {
  const auto r = sh("gate --cases " + d("mini.cases") + " --kernel 'mutant.scale_off_1pct' --out " + d("o"));
  ASSERT_EQ(r.code, 1) << r.out;
  // The first printed repro line of a bitwise failure (std::regex trips GCC 12 warnings under ASan).
  std::string desc;
  for (std::size_t at = 0; (at = r.out.find("attest run '", at)) != std::string::npos;) {
    at += 12;
    const auto end = r.out.find('\'', at);
    const std::string d = r.out.substr(at, end - at);
    if (d.ends_with("check=bitwise")) {
      desc = d;
      break;
    }
  }
  ASSERT_FALSE(desc.empty()) << r.out;
  const auto again = sh("run '" + desc + "'");
  EXPECT_EQ(again.code, 1) << again.out;
  EXPECT_NE(again.out.find("failed      bitwise"), std::string::npos) << again.out;
  EXPECT_NE(again.out.find("differs from the recipe emulator"), std::string::npos) << again.out;
  EXPECT_NE(again.out.find("first_mismatches"), std::string::npos) << again.out;
  // The honest kernel on the same case passes.
  std::string honest = desc;
  honest.replace(honest.find("mutant.scale_off_1pct"), std::string("mutant.scale_off_1pct").size(), "cpu.tiled.bf16");
  const auto good = sh("run '" + honest + "'");
  EXPECT_EQ(good.code, 0) << good.out;
}

TEST_F(Cli, UsageAndInputErrorsExitTwo) {
  EXPECT_EQ(sh("gate --profile nosuch --out " + d("o")).code, 2);
  EXPECT_EQ(sh("gate --cases nosuch --out " + d("o")).code, 2);
  EXPECT_EQ(sh("gate --shard 3/2 --cases " + d("mini.cases") + " --out " + d("o")).code, 2);
  EXPECT_EQ(sh("gate --check bitwize --cases " + d("mini.cases") + " --out " + d("o")).code, 2);
  EXPECT_EQ(sh("gate --bogus").code, 2);
  EXPECT_EQ(sh("run 'kernel=cpu.tiled.bf16 recipe=bf16 problem=b1h1s8d16 dist=normal'").code, 2);
  const auto r = sh("run 'kernel=nosuch recipe=bf16 problem=b1h1s8d16 dist=normal seed=1'");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("cpu.tiled.bf16"), std::string::npos) << "unknown names list the valid ones: " << r.out;
  EXPECT_EQ(sh("list nonsense").code, 2);
}

TEST_F(Cli, ResumeSkipsJournaledCasesAndShardsPartitionTheGroups) {
  const std::string base = "gate --cases " + d("mini.cases") + " --kernel 'cpu.tiled.f*' --out " + d("o");
  ASSERT_EQ(sh(base).code, 0);
  const auto n = lines(dir_ / "o/results.jsonl");
  EXPECT_EQ(n, 28u);  // cpu.tiled.{f32, fp16, fp8_fp8, fp8_fp8_fnuz} x (3 + 2 checks + a refusal row per template)
  const auto again = sh(base + " --resume");
  EXPECT_EQ(again.code, 0);
  EXPECT_NE(again.out.find("(28 resumed from the journal)"), std::string::npos) << again.out;
  EXPECT_EQ(lines(dir_ / "o/results.jsonl"), n);  // nothing re-run, nothing appended

  std::size_t sum = 0;
  for (int i = 0; i < 2; ++i) {
    const auto s = sh("gate --cases " + d("mini.cases") + " --kernel 'cpu.tiled.f*' --shard " + std::to_string(i) + "/2 --out " +
                      d(i == 0 ? "s0" : "s1"));
    EXPECT_EQ(s.code, 0);
    sum += lines(dir_ / (i == 0 ? "s0/results.jsonl" : "s1/results.jsonl"));
  }
  EXPECT_EQ(sum, n);
  // Without --shard, GoogleTest's variables shard the same way.
  const auto env = sh("gate --cases " + d("mini.cases") + " --kernel 'cpu.tiled.f*' --out " + d("e")).code;
  EXPECT_EQ(env, 0);
  const std::string cmd = "GTEST_SHARD_INDEX=1 GTEST_TOTAL_SHARDS=2 " + std::string(ATTEST_CLI) + " gate --cases " +
                          d("mini.cases") + " --kernel 'cpu.tiled.f*' --out " + d("e1");
  EXPECT_EQ(attest::testing::run_command(cmd).code, 0);
  EXPECT_EQ(lines(dir_ / "e1/results.jsonl"), lines(dir_ / "s1/results.jsonl"));
}

TEST_F(Cli, ListsNameWhatExists) {
  auto r = sh("list checks");
  EXPECT_EQ(r.code, 0);
  for (const char* c : {"bitwise", "accuracy", "determinism", "call_path", "layout", "poison", "canary", "churn", "split_kv",
                        "masked_rows", "nonfinite", "subnormal", "refusal"})
    EXPECT_NE(r.out.find(c), std::string::npos) << c;
  r = sh("list profiles");
  for (const char* p : {"cpu", "sm90", "gfx942", "gfx950", "gfx1201"}) EXPECT_NE(r.out.find(p), std::string::npos) << p;
  r = sh("list cases " + d("mini.cases") + " --kernel cpu.ref64");
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.out.find("kernel=cpu.ref64 recipe=f32 problem=b1h2s40t72d32 dist=normal seed=1 check=accuracy"), std::string::npos)
      << r.out;
}

TEST_F(Cli, QualifyNamesDeviceDriverAndCommit) {
  const auto r = sh("qualify --cases " + d("mini.cases") + " --kernel cpu.tiled.bf16 --out " + d("q"));
  std::ifstream in(dir_ / "q/qualify.md");
  std::stringstream ss;
  ss << in.rdbuf();
  const auto md = ss.str();
  // Only a clean build (tracked files at the stamped commit) may say QUALIFIED: a fresh clone
  // (CI) does; a working copy with edits is refused and says why.
  std::ifstream js(dir_ / "q/qualify.json");
  const bool dirty = nlohmann::json::parse(js)["meta"]["dirty"].get<bool>();
  if (!dirty) {
    EXPECT_EQ(r.code, 0) << r.out;
    EXPECT_NE(md.find("# attest qualify: QUALIFIED"), std::string::npos) << md;
  } else {
    EXPECT_EQ(r.code, 1) << r.out;
    EXPECT_NE(md.find("# attest qualify: NOT QUALIFIED\n\n- refused: the build is dirty"), std::string::npos) << md;
  }
  EXPECT_NE(md.find("- device: cpu: "), std::string::npos) << md;
  EXPECT_NE(md.find("- driver: "), std::string::npos);
  EXPECT_NE(md.find("- suite commit: `"), std::string::npos);
  EXPECT_NE(md.find("- profile: `cpu`"), std::string::npos);
}

}  // namespace
