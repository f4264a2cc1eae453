// Reports: Markdown and JUnit against reviewed golden files, JUnit parsed back structurally
// (Boost.PropertyTree's XML parser, an independent reader), JSON counts, summary table.
#include <gtest/gtest.h>

#include <boost/property_tree/ptree.hpp>
#include <boost/property_tree/xml_parser.hpp>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "attest/conformance/gate.hpp"

namespace attest::conformance {
namespace {

Result make(const char* kernel, const char* recipe, const char* check, Verdict v, std::string reason, double s) {
  Result r;
  r.kernel = kernel;
  r.recipe = recipe;
  r.check = check;
  r.problem = "b1h2s64d64";
  r.dist = "normal";
  r.seed = 1;
  r.descriptor = std::string("kernel=") + kernel + " recipe=" + recipe + " problem=b1h2s64d64 dist=normal seed=1 check=" + check;
  r.outcome = {v, std::move(reason), nlohmann::json::object()};
  r.seconds = s;
  return r;
}

GateReport sample() {
  GateReport g;
  g.meta = {{"profile", "cpu"}, {"cases", "smoke"}, {"shard", "0/1"}, {"commit", "0123456789ab"}, {"dirty", true},
            {"device", "cpu: test"}, {"tolerances", {{"source", "built-in"}, {"hash", "fnv1a64:00000000deadbeef"}}}};
  g.results = {
      make("k.a", "bf16", "bitwise", Verdict::failed,
           "out: 3 of 256 elements differ bitwise; first at [0, 1, 0, 2]: 1 < 2 & \"q\" 'x'", 0.25),
      make("k.a", "bf16", "accuracy", Verdict::passed, "", 0.5),
      make("k.b", "fp16", "accuracy", Verdict::mistrusted, "kernel output is all zero while the reference is not", 0.125),
      make("k.b", "fp16", "layout", Verdict::unsupported, "kernel supports no other layout for this problem", 0.0),
      make("k.b", "fp16", "poison", Verdict::error, "kernel k.b threw on b1h2s64d64: bad alloc", 0.0625),
  };
  g.errors = {"profile cpu requires kernel 'gpu.*' which this build does not register"};
  return g;
}

// Attributes read as text: Boost.PropertyTree's numeric translator trips GCC 12's
// -Wmaybe-uninitialized under -fsanitize at -O2.
int attr_int(const boost::property_tree::ptree& t, const char* name) {
  return std::stoi(t.get<std::string>(std::string("<xmlattr>.") + name));
}

std::string golden(const std::string& name, const std::string& actual) {
  const std::string path = std::string(ATTEST_GATE_GOLDEN) + "/" + name;
  if (std::getenv("ATTEST_UPDATE_GOLDEN")) std::ofstream(path) << actual;
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(Reports, MarkdownMatchesGolden) { EXPECT_EQ(markdown_report(sample()), golden("gate.md", markdown_report(sample()))); }

TEST(Reports, JunitMatchesGolden) { EXPECT_EQ(junit_report(sample()), golden("gate.junit.xml", junit_report(sample()))); }

TEST(Reports, JunitParsesBackWithCountsAndEscapedText) {
  namespace pt = boost::property_tree;
  std::istringstream in(junit_report(sample()));
  pt::ptree tree;
  pt::read_xml(in, tree);
  const auto& root = tree.get_child("testsuites");
  EXPECT_EQ(attr_int(root, "tests"), 6);     // 5 cases + 1 setup error
  EXPECT_EQ(attr_int(root, "failures"), 2);  // failed + mistrusted
  EXPECT_EQ(attr_int(root, "errors"), 2);    // error + setup error
  EXPECT_EQ(attr_int(root, "skipped"), 1);   // unsupported
  EXPECT_NEAR(std::stod(root.get<std::string>("<xmlattr>.time")), 0.9375, 5e-4);  // printed with 3 decimals
  int cases = 0, failures = 0, errors = 0, skipped = 0, suites = 0;
  for (const auto& [tag, suite] : root) {
    if (tag != "testsuite") continue;
    ++suites;
    int in_suite = 0;
    for (const auto& [t, tc] : suite) {
      if (t != "testcase") continue;
      ++cases, ++in_suite;
      if (auto f = tc.get_child_optional("failure")) {
        ++failures;
        EXPECT_EQ(f->data().rfind("attest run '", 0), 0u);
        if (tc.get<std::string>("<xmlattr>.classname") == "k.a.bitwise") {
          EXPECT_EQ(f->get<std::string>("<xmlattr>.message"),
                    "out: 3 of 256 elements differ bitwise; first at [0, 1, 0, 2]: 1 < 2 & \"q\" 'x'");
        }
      }
      errors += tc.get_child_optional("error").has_value();
      skipped += tc.get_child_optional("skipped").has_value();
    }
    EXPECT_EQ(attr_int(suite, "tests"), in_suite);
  }
  EXPECT_EQ(suites, 3);  // setup, "k.a bf16", "k.b fp16"
  EXPECT_EQ(cases, 6);
  EXPECT_EQ(failures, 2);
  EXPECT_EQ(errors, 2);
  EXPECT_EQ(skipped, 1);
}

TEST(Reports, JsonCountsAndExitCode) {
  const auto g = sample();
  const auto j = json_report(g);
  EXPECT_EQ(j["counts"]["total"], 5);
  EXPECT_EQ(j["counts"]["failed"], 1);
  EXPECT_EQ(j["counts"]["mistrusted"], 1);
  EXPECT_EQ(j["exit_code"], 1);
  EXPECT_EQ(j["results"].size(), 5u);
  EXPECT_EQ(result_from_json(j["results"][0]).outcome.reason, g.results[0].outcome.reason);

  GateReport ok;
  ok.results = {g.results[1], g.results[3]};  // passed + unsupported
  EXPECT_EQ(ok.exit_code(), 0);
  ok.errors = {"setup"};
  EXPECT_EQ(ok.exit_code(), 1);
}

TEST(Reports, SummaryTableCountsPerKernelRecipeCheck) {
  const auto t = summary_table(sample());
  EXPECT_NE(t.find("total 5 cases: 1 passed, 1 failed, 1 unsupported, 1 mistrusted, 1 error, 0 invalid"), std::string::npos) << t;
  EXPECT_NE(t.find("setup error: profile cpu requires kernel 'gpu.*'"), std::string::npos);
  // Rows in registry order of checks: bitwise before accuracy for k.a.
  EXPECT_LT(t.find("bitwise"), t.find("accuracy"));
}

TEST(Shards, ParseAndEnvironment) {
  EXPECT_EQ(parse_shard("1/4").index, 1);
  EXPECT_EQ(parse_shard("1/4").count, 4);
  EXPECT_THROW((void)parse_shard("4/4"), Error);
  EXPECT_THROW((void)parse_shard("1"), Error);
  ::setenv("GTEST_SHARD_INDEX", "2", 1);
  ::setenv("GTEST_TOTAL_SHARDS", "3", 1);
  const auto s = shard_from_environment();
  ::unsetenv("GTEST_SHARD_INDEX");
  ::unsetenv("GTEST_TOTAL_SHARDS");
  EXPECT_EQ(s.index, 2);
  EXPECT_EQ(s.count, 3);
}

}  // namespace
}  // namespace attest::conformance
