// Case descriptors: round trip, canonical form, repro lines, and one-line errors.
#include <gtest/gtest.h>

#include "attest/conformance/case.hpp"
#include "attest/conformance/suite.hpp"
#include "attest/core/status.hpp"

namespace attest::conformance {
namespace {

TEST(CaseDescriptor, RoundTripsTheDocumentedExample) {
  const std::string d = "kernel=cpu.tiled.bf16 recipe=bf16 problem=b1h2s256d64:mask=causal_tl dist=normal seed=3 check=accuracy";
  const Case c = parse_case(d);
  EXPECT_EQ(c.kernel, "cpu.tiled.bf16");
  EXPECT_EQ(recipe_label(c.recipe), "bf16");
  EXPECT_EQ(c.problem.seqlen_q, 256);
  EXPECT_EQ(c.problem.head_dim, 64);
  EXPECT_EQ(c.problem.mask, Mask::causal_tl);
  EXPECT_EQ(c.dist, datasets::Distribution::normal);
  EXPECT_EQ(c.seed, 3u);
  EXPECT_EQ(c.check, "accuracy");
  EXPECT_EQ(to_string(c), d);
  EXPECT_EQ(parse_case(to_string(c)), c);
}

TEST(CaseDescriptor, FieldsInAnyOrderGiveTheCanonicalForm) {
  const Case c = parse_case("seed=9 dist=sink problem=b2h4k2s80t150d32:mask=causal_br recipe=fp16 kernel=k.x");
  EXPECT_EQ(to_string(c), "kernel=k.x recipe=fp16 problem=b2h4k2s80t150d32:mask=causal_br dist=sink seed=9");
  EXPECT_TRUE(c.check.empty());
}

TEST(CaseDescriptor, FullRecipeStringWithSeparatorsRoundTrips) {
  // ';', ':' and '=' inside the recipe value: only the first '=' of a field separates key/value.
  Recipe r = parse_recipe("bf16");
  r.tile_kv = 7;
  Case c{"cpu.x", r, parse_problem("b1h1s8d16:cu_q=0,8:cu_kv=0,8"), datasets::Distribution::exact_int, 12, "bitwise"};
  const auto s = to_string(c);
  EXPECT_NE(s.find("recipe=" + to_string(r)), std::string::npos);
  EXPECT_NE(s.find(';'), std::string::npos);
  EXPECT_EQ(parse_case(s), c);
}

TEST(CaseDescriptor, NamedRecipeGivenInFullPrintsItsLabel) {
  const Case c = parse_case("kernel=a recipe=q=fp16;k=fp16;v=fp16;p=fp16;out=fp16 problem=b1h1s4d8 dist=normal seed=1");
  EXPECT_EQ(recipe_label(c.recipe), "fp16");
  EXPECT_NE(to_string(c).find("recipe=fp16 "), std::string::npos);
}

TEST(CaseDescriptor, ReproLineIsSingleQuotedAndParsesBack) {
  const Case c = parse_case("kernel=cpu.ref64 recipe=f32 problem=b1h2s64d64 dist=normal seed=1 check=poison");
  const auto line = repro_line(c);
  EXPECT_EQ(line, "attest run 'kernel=cpu.ref64 recipe=f32 problem=b1h2s64d64 dist=normal seed=1 check=poison'");
  EXPECT_EQ(parse_case(line), c);
  EXPECT_EQ(group_key(c), "kernel=cpu.ref64 recipe=f32 problem=b1h2s64d64 dist=normal seed=1");
}

TEST(CaseDescriptor, DefectsAreOneLineErrorsNamingTheField) {
  auto msg = [](const char* s) {
    try {
      (void)parse_case(s);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(msg("kernel=a recipe=bf16 problem=b1h1s4d8 dist=normal").find("'seed' is missing"), std::string::npos);
  EXPECT_NE(msg("kernel=a recipe=bf16 problem=b1h1s4d8 dist=normal seed=1 colour=red").find("unknown field 'colour'"),
            std::string::npos);
  EXPECT_NE(msg("kernel=a kernel=b recipe=bf16 problem=b1h1s4d8 dist=normal seed=1").find("given twice"), std::string::npos);
  EXPECT_NE(msg("kernel=a recipe=bf16 problem=b1h1s4d8 dist=gauss seed=1").find("gauss"), std::string::npos);
  EXPECT_NE(msg("kernel=a recipe=bf16 problem=b1h1s4d8 dist=normal seed=-1").find("seed"), std::string::npos);
  EXPECT_NE(msg("kernel=a recipe=bf16 problem=b1h1s4d8 dist=normal seed=1 oops").find("key=value"), std::string::npos);
}

TEST(SeedList, ListsAndInclusiveRanges) {
  EXPECT_EQ(parse_seed_list("1,4-6,9"), (std::vector<std::uint64_t>{1, 4, 5, 6, 9}));
  EXPECT_EQ(parse_seed_list("1-50").size(), 50u);
  EXPECT_THROW(parse_seed_list("5-1"), Error);
  EXPECT_THROW(parse_seed_list("x"), Error);
}

}  // namespace
}  // namespace attest::conformance
