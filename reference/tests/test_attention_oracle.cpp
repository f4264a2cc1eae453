// The reference attention against PyTorch's float64 attention (oracles/make_torch_attention.py
// wrote the vectors into oracles/torch/<case>/; each meta.json records torch's version and the
// date). Skips while the directory is absent.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "attention_test_util.hpp"
#include "attest/datasets/npy.hpp"
#include "attest/reference/attention.hpp"
#include "attest/testing/run_cli.hpp"
#include "attest/testing/temp_dir.hpp"

namespace attest::ref {
namespace {

namespace fs = std::filesystem;

fs::path oracle_dir() {
  if (const char* env = std::getenv("ATTEST_TORCH_ORACLE_DIR")) return env;
  return ATTEST_TORCH_ORACLE_DIR;
}

std::vector<fs::path> cases() {
  std::vector<fs::path> out;
  if (!fs::is_directory(oracle_dir())) return out;
  for (const auto& e : fs::directory_iterator(oracle_dir()))
    if (fs::exists(e.path() / "meta.json")) out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

Problem problem_of(const nlohmann::json& m) {
  auto i = [&](const char* key) { return m.at(key).get<std::int64_t>(); };
  return test::make_problem(i("batch"), i("heads_q"), i("heads_kv"), i("seqlen_q"), i("seqlen_kv"), i("head_dim"),
                            i("head_dim_v"), parse_mask(m.at("mask").get<std::string>()), m.at("scale").get<double>());
}

// torch and attest each carry ~sqrt(T) 2^-53 relative error (a few 1e-16 here); 1e-12 leaves room
// for torch's own summation orders while catching any mask, scale or GQA mismatch (O(1) errors).
// The LSE bound is relative to max(1, |lse|) because lse = m + log(l) rounds at |m|.
void expect_matches(const std::string& what, const std::vector<double>& out, const std::vector<double>& lse,
                    const std::vector<double>& want_out, const std::vector<double>& want_lse) {
  ASSERT_EQ(out.size(), want_out.size()) << what;
  ASSERT_EQ(lse.size(), want_lse.size()) << what;
  EXPECT_LE(test::rel_l2(out, want_out), 1e-12) << what;
  for (std::size_t i = 0; i < lse.size(); ++i) {
    if (std::isinf(want_lse[i])) {
      EXPECT_EQ(lse[i], want_lse[i]) << what << " lse " << i;
    } else {
      EXPECT_LE(std::abs(lse[i] - want_lse[i]), 1e-12 * std::max(1.0, std::abs(want_lse[i]))) << what << " lse " << i;
    }
  }
  EXPECT_GT(test::max_abs(want_out), 0.0) << what << ": degenerate oracle (all zero)";
}

TEST(ReferenceOracle, LibraryMatchesTorchFloat64) {
  const auto dirs = cases();
  if (dirs.empty()) GTEST_SKIP() << "no oracle vectors in " << oracle_dir() << " (run oracles/make_torch_attention.py)";
  for (const fs::path& dir : dirs) {
    std::ifstream f(dir / "meta.json");
    const nlohmann::json meta = nlohmann::json::parse(f);
    const Problem p = problem_of(meta);
    const Tensor q = datasets::read_npy(dir / "q.npy"), k = datasets::read_npy(dir / "k.npy"),
                 v = datasets::read_npy(dir / "v.npy");
    const auto want_out = test::values(datasets::read_npy(dir / "out.npy"));
    const auto want_lse = test::values(datasets::read_npy(dir / "lse.npy"));
    for (Algorithm alg : {Algorithm::online, Algorithm::direct}) {
      const AttentionOutput r = attention(p, q, k, v, Precision::fp64, alg);
      expect_matches(dir.filename().string() + " " + std::string(algorithm_name(alg)), test::values(r.out),
                     test::values(r.lse), want_out, want_lse);
    }
  }
}

// One case end to end through the CLI binary: bshd files in, .npy out.
TEST(ReferenceOracle, CliMatchesTorchFloat64) {
  const auto dirs = cases();
  if (dirs.empty()) GTEST_SKIP() << "no oracle vectors in " << oracle_dir();
  for (const fs::path& dir : dirs) {
    std::ifstream f(dir / "meta.json");
    const nlohmann::json meta = nlohmann::json::parse(f);
    if (meta.at("heads_q") == meta.at("heads_kv") && meta.at("mask") != "causal_br") continue;
    const attest::testing::TempDir tmp("oracle_cli");
    char scale[64];
    std::snprintf(scale, sizeof scale, "%.17g", meta.at("scale").get<double>());
    const std::string args = "reference --q " + (dir / "q.npy").string() + " --k " + (dir / "k.npy").string() + " --v " +
                             (dir / "v.npy").string() + " --mask " + meta.at("mask").get<std::string>() + " --scale " +
                             scale + " --out " + (tmp / "out.npy").string() + " --lse " + (tmp / "lse.npy").string();
    const auto r = attest::testing::run_cli(args, attest::testing::Stderr::apart);
    ASSERT_EQ(r.code, 0) << args << "\n" << r.err;
    expect_matches(dir.filename().string() + " via CLI", test::values(datasets::read_npy(tmp / "out.npy")),
                   test::values(datasets::read_npy(tmp / "lse.npy")),
                   test::values(datasets::read_npy(dir / "out.npy")), test::values(datasets::read_npy(dir / "lse.npy")));
    return;  // one case is enough: the library test covers all of them
  }
  GTEST_SKIP() << "no GQA or causal_br case among the oracle vectors";
}

}  // namespace
}  // namespace attest::ref
