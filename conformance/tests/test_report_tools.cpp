// attest_bench on hand-made reports: sample statistics (closed forms), rotation sizing, the
// diff's arithmetic and flags (each number below is worked out in the comment next to it),
// merge order of shards, malformed input, shape files (token counts re-derived from the
// published model geometry) and the HTML page being self-contained.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "attest/conformance/bench.hpp"
#include "attest/conformance/report_tools.hpp"
#include "attest/core/problem.hpp"
#include "attest/core/status.hpp"

namespace {

namespace cf = attest::conformance;
namespace rp = attest::conformance::report;
using nlohmann::json;

TEST(SampleStats, QuartilesByLinearInterpolation) {
  // numpy.percentile([5,1,4,2,3], [25,50,75]) (linear) = 2, 3, 4.
  const auto s = cf::sample_stats({5, 1, 4, 2, 3});
  EXPECT_DOUBLE_EQ(s.median, 3);
  EXPECT_DOUBLE_EQ(s.q1, 2);
  EXPECT_DOUBLE_EQ(s.q3, 4);
  EXPECT_DOUBLE_EQ(s.min, 1);
  EXPECT_DOUBLE_EQ(s.max, 5);
  EXPECT_DOUBLE_EQ(s.spread(), 2.0 / 3.0);
  // Even count: numpy.percentile([1,2,3,10], 50) = 2.5, 25 -> 1.75, 75 -> 4.75.
  const auto e = cf::sample_stats({10, 1, 3, 2});
  EXPECT_DOUBLE_EQ(e.median, 2.5);
  EXPECT_DOUBLE_EQ(e.q1, 1.75);
  EXPECT_DOUBLE_EQ(e.q3, 4.75);
  EXPECT_THROW(cf::sample_stats({}), attest::Error);
}

TEST(Rotation, CopiesExceedTheTarget) {
  constexpr std::size_t MiB = 1 << 20;
  EXPECT_EQ(cf::rotation_copies(10 * MiB, 64 * MiB), 7);   // 7 x 10 = 70 > 64, 6 x 10 = 60 is not
  EXPECT_EQ(cf::rotation_copies(64 * MiB, 64 * MiB), 2);   // equal is not larger
  EXPECT_EQ(cf::rotation_copies(100 * MiB, 64 * MiB), 1);  // one set already exceeds it
  EXPECT_EQ(cf::rotation_copies(1, 64 * MiB), 64);         // capped
  EXPECT_GE(cf::host_rotation_bytes(), std::size_t{2} << 20);
}

json bench_row(const std::string& kernel, double median, double spread, const std::string& status = "timed") {
  json r = {{"case", "kernel=" + kernel + " recipe=bf16 problem=b1h2s128d64"}, {"type", "attention"}, {"kernel", kernel},
            {"recipe", "bf16"}, {"shape", "s"}, {"problem", "b1h2s128d64"}, {"status", status}};
  if (status == "timed") {
    r["median_ms"] = median;
    r["spread"] = spread;
    r["q1_ms"] = median * (1 - spread / 2);
    r["q3_ms"] = median * (1 + spread / 2);
    r["tflops"] = 1.0 / median;
  }
  return r;
}

rp::Doc bench_doc(std::vector<json> rows, const std::string& path = "x.json") {
  json j = {{"kind", "bench"}, {"meta", json::object()}, {"results", rows}};
  return rp::parse(j.dump(), path);
}

TEST(Diff, BenchRatiosThresholdsAndNoise) {
  const auto base = bench_doc({bench_row("a", 10, 0.01), bench_row("b", 10, 0.01), bench_row("c", 10, 0.1), bench_row("d", 10, 0.01),
                               bench_row("e", 10, 0.01), bench_row("gone", 1, 0.01)});
  const auto cand = bench_doc({bench_row("a", 11, 0.01),    // +10% > 5% and > 2% spread: regression
                               bench_row("b", 10.3, 0.01),  // +3% < 5%: nothing
                               bench_row("c", 11, 0.1),     // +10% but inside 20% combined spread: noise
                               bench_row("d", 8, 0.01),     // -20%: improvement
                               bench_row("e", 0, 0, "error"),  // stopped running: regression
                               bench_row("new", 1, 0.01)});
  const auto d = rp::diff(base, cand, {});
  EXPECT_EQ(d.regressions, 2);
  std::map<std::string, json> by;
  for (const auto& r : d.json["perf"]) by[r["kernel"]] = r;
  EXPECT_DOUBLE_EQ(by["a"]["ratio"].get<double>(), 1.1);
  EXPECT_EQ(by["a"]["flag"], "regression");
  EXPECT_EQ(by["b"]["flag"], "");
  EXPECT_EQ(by["c"]["flag"], "noise");
  EXPECT_EQ(by["d"]["flag"], "improvement");
  EXPECT_EQ(by["e"]["flag"], "regression");
  EXPECT_EQ(d.json["only_base"], json::array({"kernel=gone recipe=bf16 problem=b1h2s128d64"}));
  EXPECT_EQ(d.json["only_candidate"], json::array({"kernel=new recipe=bf16 problem=b1h2s128d64"}));
  EXPECT_NE(d.markdown.find("REGRESSED (2 regressions)"), std::string::npos);
  EXPECT_NE(d.markdown.find("| `a` | `bf16` | s | 10 | 11 | 1.100 |"), std::string::npos) << d.markdown;
  // A higher threshold keeps a but not e (a status loss is always a regression).
  rp::DiffOptions loose;
  loose.perf_threshold_pct = 15;
  EXPECT_EQ(rp::diff(base, cand, loose).regressions, 1);
}

json gate_result(const std::string& kernel, const std::string& verdict, double rel_l2, double floor, double cosine) {
  const std::string c = "kernel=" + kernel + " recipe=bf16 problem=b1h2s64d64 dist=normal seed=1 check=accuracy";
  json m = {{"rel_l2", {{"measured", rel_l2}, {"budget", 1e-3}, {"floor", floor}, {"bound", 2e-3 + 2 * floor}, {"ok", true}}},
            {"cosine", {{"measured", cosine}, {"min", 0.999}, {"ok", cosine >= 0.999}}}};
  return {{"case", c},           {"kernel", kernel}, {"recipe", "bf16"},  {"problem", "b1h2s64d64"},
          {"dist", "normal"},    {"seed", 1},        {"check", "accuracy"}, {"verdict", verdict},
          {"reason", ""},        {"seconds", 0.1},   {"figures", {{"judgement", {{"metrics", m}}}}}};
}

rp::Doc gate_doc(std::vector<json> rows, const std::string& shard = "0/1") {
  json j = {{"meta", {{"shard", shard}, {"profile", "cpu"}, {"cases", "x"}}}, {"counts", json::object()}, {"results", rows}};
  return rp::parse(j.dump(), "g" + shard + ".json");
}

TEST(Diff, GateFiguresAgainstTheFloorAndVerdicts) {
  const auto base = gate_doc({gate_result("k", "passed", 1e-3, 1e-4, 0.99999)});
  // rel_l2 1e-3 -> 1.5e-3: ratio 1.5 > 1.25, growth 5e-4 > floor 1e-4: regression.
  // cosine 0.99999 -> 0.9999: error 1e-5 -> 1e-4, ratio 10, no floor: regression.
  const auto worse = gate_doc({gate_result("k", "passed", 1.5e-3, 1e-4, 0.9999)});
  auto d = rp::diff(base, worse, {});
  ASSERT_EQ(d.json["accuracy"].size(), 2u);
  for (const auto& r : d.json["accuracy"]) {
    EXPECT_EQ(r["flag"], "regression") << r.dump();
    if (r["figure"] == "judgement.metrics.rel_l2") {
      EXPECT_NEAR(r["ratio"].get<double>(), 1.5, 1e-12);
    }
    if (r["figure"] == "judgement.metrics.cosine") {
      EXPECT_NEAR(r["ratio"].get<double>(), 10, 1e-6);
    }
  }
  EXPECT_EQ(d.regressions, 2);
  // rel_l2 1e-3 -> 1.2e-3 (ratio 1.2 < 1.25), cosine unchanged: no regression.
  EXPECT_EQ(rp::diff(base, gate_doc({gate_result("k", "passed", 1.2e-3, 1e-4, 0.99999)}), {}).regressions, 0);
  // rel_l2 1e-3 -> 1.5e-3 but the floor is 1e-3: reordering noise, no regression.
  EXPECT_EQ(rp::diff(gate_doc({gate_result("k", "passed", 1e-3, 1e-3, 0.99999)}),
                     gate_doc({gate_result("k", "passed", 1.5e-3, 1e-3, 0.99999)}), {})
                .regressions,
            0);
  // passed -> failed is a regression of its own.
  const auto failed = rp::diff(base, gate_doc({gate_result("k", "failed", 1e-3, 1e-4, 0.99999)}), {});
  EXPECT_EQ(failed.regressions, 1);
  EXPECT_EQ(failed.json["verdicts"][0]["flag"], "regression");
  // --pair joins a renamed kernel; without it the cases are one-sided.
  const auto renamed = gate_doc({gate_result("k2", "passed", 1.5e-3, 1e-4, 0.99999)});
  EXPECT_EQ(rp::diff(base, renamed, {}).json["only_candidate"].size(), 1u);
  rp::DiffOptions o;
  o.pairs = {{"k", "k2"}};
  EXPECT_EQ(rp::diff(base, renamed, o).regressions, 1);  // rel_l2 only: the cosine is unchanged
  EXPECT_THROW(rp::diff(base, bench_doc({bench_row("a", 1, 0)}), {}), attest::Error);
}

json grouped(const std::string& kernel, int seed, const std::string& check) {
  json r = gate_result(kernel, "passed", 1e-3, 1e-4, 0.99999);
  r["seed"] = seed;
  r["check"] = check;
  r["case"] = "kernel=" + kernel + " seed=" + std::to_string(seed) + " check=" + check;
  return r;
}

TEST(Merge, InterleavesShardGroupsBackIntoTheUnshardedOrder) {
  // Groups g0..g4 (two checks each); the gate deals g to shard g % 2.
  std::vector<json> all;
  for (int g = 0; g < 5; ++g)
    for (const char* c : {"accuracy", "poison"}) all.push_back(grouped("k", g, c));
  std::vector<json> s0, s1;
  for (int g = 0; g < 5; ++g)
    for (int c = 0; c < 2; ++c) (g % 2 ? s1 : s0).push_back(all[static_cast<std::size_t>(2 * g + c)]);
  // Argument order does not matter: shards are placed by their index.
  const auto m = rp::merge({gate_doc(s1, "1/2"), gate_doc(s0, "0/2")});
  EXPECT_EQ(m["results"], json(all));
  EXPECT_EQ(m["counts"]["total"], 10);
  EXPECT_EQ(m["exit_code"], 0);
  EXPECT_THROW(rp::merge({gate_doc(s0, "0/2")}), attest::Error);                         // 1/2 missing
  EXPECT_THROW(rp::merge({gate_doc(s0, "0/2"), gate_doc(s1, "0/2")}), attest::Error);    // given twice
  EXPECT_THROW(rp::merge({gate_doc(s0, "0/2"), gate_doc(s1, "1/3")}), attest::Error);    // other count
  // A conflicting duplicate (same case, other verdict) is refused; an identical one kept once.
  auto other = all[0];
  other["verdict"] = "failed";
  const auto j1 = rp::parse(all[0].dump(), "a.jsonl");
  const auto j2 = rp::parse(other.dump(), "b.jsonl");
  EXPECT_THROW(rp::merge({j1, j2}), attest::Error);
  EXPECT_EQ(rp::merge({j1, j1})["results"].size(), 1u);
}

TEST(Parse, MalformedInputNamesTheFileAndTheDefect) {
  auto msg = [](const std::string& text) {
    try {
      (void)rp::parse(text, "bad.json");
    } catch (const attest::Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(msg(""), "bad.json: empty file");
  EXPECT_NE(msg("{\"results\": [").find("bad.json:1: not JSON"), std::string::npos);
  EXPECT_NE(msg("[1, 2]").find("bad.json: not a report"), std::string::npos);
  EXPECT_NE(msg("{\"kind\": \"bench\", \"results\": [{\"case\": 1}]}").find("bad.json: result 0: field 'case'"), std::string::npos);
  EXPECT_NE(msg("{\"kind\": \"bench\", \"results\": [{\"case\": \"c\", \"type\": \"attention\", \"kernel\": \"k\", \"status\": "
                "\"timed\"}]}")
                .find("timed row without a numeric 'median_ms'"),
            std::string::npos);
  EXPECT_NE(msg("{\"counts\": {}, \"results\": [{\"case\": \"c\"}]}").find("bad.json: result 0: result record"), std::string::npos);
  EXPECT_NE(msg("{\"a\": 1}").find("not a gate, bench or diff report"), std::string::npos);
}

TEST(Shapes, ParseAndRefuse) {
  const auto v = cf::parse_shapes("# c\nx b1h2s64d64  # tail\n\ny b1h2s64t32d64\n", "f");
  ASSERT_EQ(v.size(), 2u);
  EXPECT_EQ(v[1].problem, "b1h2s64t32d64");
  EXPECT_THROW(cf::parse_shapes("x\n", "f"), attest::Error);
  EXPECT_THROW(cf::parse_shapes("x b1h2s64d64\nx b1h2s64d64\n", "f"), attest::Error);
  EXPECT_THROW(cf::parse_shapes("x b1h3k2s64d64\n", "f"), attest::Error);  // heads_q % heads_kv != 0
  EXPECT_THROW(cf::parse_shapes("# only comments\n", "f"), attest::Error);
  EXPECT_THROW(cf::load_shapes("no-such-set"), attest::Error);
}

TEST(Shapes, BuiltinModelSetsMatchThePublishedGeometry) {
  // Tokens from the published VAE strides and patch sizes (the files' comments cite them).
  auto video = [](int frames, int t_stride, int h, int w, int px) {
    return static_cast<std::int64_t>((frames - 1) / t_stride + 1) * (h / px) * (w / px);
  };
  std::map<std::string, std::int64_t> want = {
      {"wan2.1-14b-720p-self", video(81, 4, 720, 1280, 16)},       // 75600
      {"wan2.1-14b-480p-self", video(81, 4, 480, 832, 16)},        // 32760
      {"hunyuanvideo-720p-joint", video(129, 4, 720, 1280, 16) + 256},
      {"hunyuanvideo-540p-joint", video(129, 4, 544, 960, 16) + 256},
      {"flux-dev-1024-joint", (1024 / 16) * (1024 / 16) + 512},
      {"flux-dev-2048-joint", (2048 / 16) * (2048 / 16) + 512},
      {"ltx-2b-768x512-self", video(121, 8, 512, 768, 32)},        // 6144
      {"ltx-2b-1216x704-self", video(121, 8, 704, 1216, 32)},
      {"qwen-image-1328-joint", (1328 / 16) * (1328 / 16) + 256},
  };
  std::map<std::string, std::int64_t> heads = {{"wan2.1-14b", 40}, {"wan2.1-1.3b", 12}, {"hunyuanvideo", 24}, {"flux", 24},
                                               {"ltx-2b", 32},      {"qwen-image", 24}};
  const auto all = cf::load_shapes("dit");
  std::size_t seen = 0;
  for (const auto& s : all) {
    const auto p = attest::parse_problem(s.problem);
    if (auto it = want.find(s.name); it != want.end()) {
      EXPECT_EQ(p.seqlen_q, it->second) << s.name;
      ++seen;
    }
    for (const auto& [prefix, h] : heads)
      if (s.name.rfind(prefix, 0) == 0) {
        EXPECT_EQ(p.heads_q, h) << s.name;
      }
    EXPECT_EQ(p.head_dim, s.name.rfind("ltx", 0) == 0 ? 64 : 128) << s.name;
  }
  EXPECT_EQ(seen, want.size());
  for (const auto& n : cf::builtin_shape_sets()) EXPECT_FALSE(cf::load_shapes(n).empty()) << n;
}

TEST(Html, SelfContainedWithTablesAndPlots) {
  const auto base = bench_doc({bench_row("a", 10, 0.01), bench_row("b", 10, 0.01)});
  const auto cand = bench_doc({bench_row("a", 11, 0.01), bench_row("b", 10, 0.01)});
  rp::Doc d;
  d.kind = rp::Kind::diff;
  d.path = "d.json";
  d.json = rp::diff(base, cand, {}).json;
  for (const auto& doc : {d, base, gate_doc({gate_result("k", "passed", 1e-3, 1e-4, 0.99999)})}) {
    const auto h = rp::html(doc);
    EXPECT_NE(h.find("<svg"), std::string::npos);
    EXPECT_NE(h.find("<table>"), std::string::npos);
    // Nothing is fetched: no src= / href= / url( / script.
    EXPECT_EQ(h.find("src="), std::string::npos);
    EXPECT_EQ(h.find("href="), std::string::npos);
    EXPECT_EQ(h.find("url("), std::string::npos);
    EXPECT_EQ(h.find("<script"), std::string::npos);
  }
  const auto h = rp::html(d);
  EXPECT_NE(h.find("<tr class=\"bad\">"), std::string::npos);  // the regression row is marked
}

}  // namespace
