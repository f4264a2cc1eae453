// The tolerance table and the generic comparator, on hand-computed numbers.
#include <gtest/gtest.h>

#include <cmath>

#include "attest/conformance/tolerance.hpp"
#include "attest/core/recipe.hpp"
#include "attest/core/status.hpp"

namespace attest::conformance {
namespace {

const char* kTable = R"({"rows": [
  {"recipe": "bf16*", "check": "accuracy", "alpha": 2, "beta": {"max_abs": 2, "rel_l2": 0},
   "eps": {"max_abs": 1e-6, "rel_l2": 0}, "cosine_min": 0.99, "reason": "test row for bf16 recipes"},
  {"recipe": "*", "check": "acc*", "alpha": 1, "beta": 1, "eps": {"max_abs": 0.5},
   "bad_fraction": {"atol": 0.3, "rtol": 0.25, "max": 0.3}, "nan_policy": "emulator", "reason": "catch-all test row"}
]})";

TEST(ToleranceTable, FirstMatchingRowWins) {
  const auto t = ToleranceTable::parse(kTable, "test");
  EXPECT_EQ(t.lookup("bf16", "accuracy").index, 0);
  EXPECT_EQ(t.lookup("bf16_fa4", "accuracy").index, 0);
  EXPECT_EQ(t.lookup("fp16", "accuracy").index, 1);
  EXPECT_EQ(t.lookup("fp16", "accuracy").nan_policy, NanPolicy::emulator);
  EXPECT_THROW((void)t.lookup("fp16", "split_kv"), Error);
  const auto& r = t.lookup("bf16", "accuracy");
  EXPECT_EQ(r.bounds.at("max_abs").alpha, 2);
  EXPECT_EQ(r.bounds.at("max_abs").beta, 2);
  EXPECT_EQ(r.bounds.at("rel_l2").beta, 0);
  EXPECT_EQ(r.bounds.count("lse_max_abs"), 0u);
}

TEST(ToleranceTable, MalformedRowsAreOneLineErrors) {
  auto msg = [](const std::string& s) {
    try {
      (void)ToleranceTable::parse(s, "t.json");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(msg(R"({"rows": [{"recipe": "*", "check": "*"}]})").find("reason"), std::string::npos);
  EXPECT_NE(msg(R"({"rows": [{"recipe": "*", "check": "*", "reason": "long enough reason", "alpah": 2}]})").find("alpah"),
            std::string::npos);
  EXPECT_NE(msg(R"({"rows": [{"recipe": "*", "check": "*", "reason": "long enough reason", "eps": {"maxabs": 1}}]})")
                .find("maxabs"),
            std::string::npos);
  EXPECT_NE(msg(R"({"rows": [{"recipe": "*", "check": "*", "reason": "long enough reason", "eps": {"max_abs": -1}}]})")
                .find(">= 0"),
            std::string::npos);
  EXPECT_NE(msg("{").find("t.json"), std::string::npos);
  EXPECT_NE(msg(R"({"rows": []})").find("non-empty"), std::string::npos);
}

TEST(Judge, NoiseFloorRuleOnHandNumbers) {
  const auto t = ToleranceTable::parse(kTable, "test");
  const auto& row = t.lookup("bf16", "accuracy");
  // bound(max_abs) = 2 * 1e-3 + 2 * 5e-4 + 1e-6 = 3.001e-3; bound(rel_l2) = 2 * 2e-3 + 0 + 0 = 4e-3.
  const MetricSet budget{{"max_abs", 1e-3}, {"rel_l2", 2e-3}}, floor{{"max_abs", 5e-4}, {"rel_l2", 1e-3}};
  auto j = judge(row, {{"max_abs", 3.0e-3}, {"rel_l2", 4e-3}, {"cosine", 0.995}}, budget, floor);
  EXPECT_TRUE(j.pass) << j.reason;
  EXPECT_NEAR(j.figures["metrics"]["max_abs"]["bound"].get<double>(), 3.001e-3, 1e-15);
  EXPECT_NEAR(j.figures["metrics"]["rel_l2"]["bound"].get<double>(), 4e-3, 1e-15);

  j = judge(row, {{"max_abs", 3.002e-3}, {"rel_l2", 1e-3}, {"cosine", 0.995}}, budget, floor);
  EXPECT_FALSE(j.pass);
  EXPECT_EQ(j.reason.rfind("max_abs 0.003002 > bound 0.003001", 0), 0u) << j.reason;

  j = judge(row, {{"max_abs", 1e-4}, {"rel_l2", 1e-3}, {"cosine", 0.98}}, budget, floor);
  EXPECT_FALSE(j.pass);
  EXPECT_NE(j.reason.find("cosine"), std::string::npos);
}

TEST(Judge, NanNeverPassesAndMissingMetricsAreListed) {
  const auto t = ToleranceTable::parse(kTable, "test");
  const auto& row = t.lookup("bf16", "accuracy");
  auto j = judge(row, {{"max_abs", std::nan("")}, {"rel_l2", 0}, {"cosine", 1}}, {}, {});
  EXPECT_FALSE(j.pass);
  j = judge(row, {{"max_abs", 0}, {"cosine", 1}}, {}, {});
  EXPECT_TRUE(j.pass);
  EXPECT_EQ(j.figures["skipped"][0], "rel_l2");
}

TEST(BadFraction, SageStyleElementTest) {
  // |d| > atol and |d| > rtol |r|: element 2 (d = 2.5, r = 1) is bad; element 3 (d = 1, r = 9) is
  // inside rtol; element 4 is NaN against a number: bad. 2 of 5.
  Tensor test(DType::f32, {5}), ref(DType::f32, {5});
  const float tv[] = {1.0f, 2.0f, 3.5f, 10.0f, NAN}, rv[] = {1.0f, 2.2f, 1.0f, 9.0f, 0.0f};
  for (int i = 0; i < 5; ++i) test.data<float>()[i] = tv[i], ref.data<float>()[i] = rv[i];
  EXPECT_DOUBLE_EQ(bad_fraction(test, ref, {0.3, 0.25, 0.3}), 0.4);
  const auto t = ToleranceTable::parse(kTable, "test");
  const auto j = judge(t.lookup("fp8", "accuracy"), {{"max_abs", 0.1}, {"bad_fraction", 0.4}}, {}, {});
  EXPECT_FALSE(j.pass);
  EXPECT_NE(j.reason.find("bad_fraction 0.4 > 0.3"), std::string::npos) << j.reason;
}

TEST(BuiltinTable, EveryNamedRecipeHasAccuracySplitKvAndNanRows) {
  const auto& t = ToleranceTable::builtin();
  for (const auto& r : named_recipes())
    for (const char* check : {"accuracy", "split_kv", "nonfinite"}) {
      const auto& row = t.lookup(r.name, check);
      EXPECT_GE(row.reason.size(), 40u) << r.name << " " << check;
      if (std::string_view(check) != "nonfinite") {
        EXPECT_TRUE(row.bounds.count("max_abs") && row.bounds.count("rel_l2") && row.bounds.count("lse_max_abs"))
            << r.name << " " << check << ": max_abs, rel_l2 and lse_max_abs must be bounded";
      }
    }
}

}  // namespace
}  // namespace attest::conformance
