// Case files, profiles and their expansion against the registry (the fake kernels of
// test_checks_fake.cpp: fake.good {bf16, f32}, fake.other {bf16}, mutant.fake {bf16}, ...).
#include <gtest/gtest.h>

#include <atomic>

#include "attest/conformance/suite.hpp"
#include "attest/core/status.hpp"
#include "attest/kernels/kernel.hpp"

namespace attest::conformance {
namespace {

const char* kProfile = R"({"name": "test", "kernels": ["fake.good", "fake.other"], "required": ["fake.good", "gpu.*"],
                          "recipes": ["*"], "cases": "smoke"})";
const char* kCases =
    "# two templates\n"
    "kernel=* recipe=* problem=b1h1s8d16 dist=normal,sink seed=1-2 check=bitwise,accuracy   # trailing comment\n"
    "\n"
    "kernel=fake.good recipe=fp16 problem=b1h1s8d16 check=refusal\n";

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(CaseFile, ParsesTemplatesWithDefaults) {
  const auto f = CaseFile::parse(kCases, "inline");
  ASSERT_EQ(f.templates.size(), 2u);
  EXPECT_EQ(f.templates[0].dists, (std::vector<std::string>{"normal", "sink"}));
  EXPECT_EQ(f.templates[0].seeds, (std::vector<std::uint64_t>{1, 2}));
  EXPECT_EQ(f.templates[0].line, 2);
  EXPECT_EQ(f.templates[1].dists, (std::vector<std::string>{"normal"}));
  EXPECT_EQ(f.templates[1].seeds, (std::vector<std::uint64_t>{1}));
  EXPECT_EQ(f.templates[1].line, 4);
}

TEST(CaseFile, DefectsNameFileAndLine) {
  EXPECT_NE(error_of([] { (void)CaseFile::parse("kernel=*\n", "f.cases"); }).find("f.cases' line 1: field 'problem' is missing"),
            std::string::npos);
  EXPECT_NE(error_of([] { (void)CaseFile::parse("\nproblem=b1h1s8d16 dist=gauss\n", "f.cases"); }).find("line 2"),
            std::string::npos);
  EXPECT_NE(error_of([] { (void)CaseFile::parse("problem=b1h1s8d16 check=bitwize\n", "f.cases"); }).find("bitwize"),
            std::string::npos);
  EXPECT_NE(error_of([] { (void)CaseFile::parse("problem=b1h1s8x16\n", "f.cases"); }).find("line 1"), std::string::npos);
  EXPECT_NE(error_of([] { (void)CaseFile::load("smokey"); }).find("smoke"), std::string::npos);
}

TEST(CaseFile, EveryBuiltinSetParses) {
  const auto names = CaseFile::builtin_names();
  for (const char* n : {"smoke", "ci", "nightly", "qualify", "seeds"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), n), names.end()) << n;
    EXPECT_FALSE(CaseFile::load(n).templates.empty()) << n;
  }
}

TEST(Profile, EveryBuiltinProfileParses) {
  for (const char* n : {"cpu", "sm90", "gfx942", "gfx950", "gfx1201"}) {
    const auto p = Profile::load(n);
    EXPECT_EQ(p.name, n);
    EXPECT_FALSE(p.required.empty()) << n;
  }
  EXPECT_EQ(Profile::load("gfx942").fp8, "fnuz");
  EXPECT_EQ(Profile::load("gfx950").mx, "native");
  EXPECT_EQ(Profile::load("sm90").mx, "emulated");
  EXPECT_NE(error_of([] { (void)Profile::parse(R"({"name": "x", "fp8": "e4m3"})", "p.json"); }).find("fnuz"),
            std::string::npos);
  EXPECT_NE(error_of([] { (void)Profile::parse(R"({"name": "x", "kernal": []})", "p.json"); }).find("kernal"),
            std::string::npos);
}

TEST(Expand, KernelsRecipesDistsSeedsAndChecksMultiply) {
  const auto f = CaseFile::parse(kCases, "inline");
  const auto p = Profile::parse(kProfile, "inline");
  const auto ex = expand(f, p, {});
  // Line 2: (fake.good x {bf16, f32} + fake.other x {bf16}) x 2 dists x 2 seeds x 3 checks (the
  // two listed, and refusal, which joins every template: a call-time refusal is judged there) = 36;
  // line 4: the literal fp16 on the literal kernel is kept (a refusal case) = 1.
  EXPECT_EQ(ex.cases.size(), 37u);
  ASSERT_EQ(ex.errors.size(), 1u);
  EXPECT_NE(ex.errors[0].find("gpu.*"), std::string::npos);
  EXPECT_EQ(to_string(ex.cases.front()), "kernel=fake.good recipe=bf16 problem=b1h1s8d16 dist=normal seed=1 check=bitwise");
  EXPECT_EQ(to_string(ex.cases.back()), "kernel=fake.good recipe=fp16 problem=b1h1s8d16 dist=normal seed=1 check=refusal");
}

TEST(Expand, SelectionNarrowsAndMutantsNeedAnExplicitGlob) {
  const auto f = CaseFile::parse(kCases, "inline");
  auto p = Profile::parse(kProfile, "inline");
  EXPECT_EQ(expand(f, p, {"", "f32", ""}).cases.size(), 12u);
  EXPECT_EQ(expand(f, p, {"", "", "accuracy"}).cases.size(), 12u);  // refusal not selected: not added
  EXPECT_EQ(expand(f, p, {"fake.other", "", ""}).cases.size(), 12u);
  // '*' does not select mutants; 'mutant*' does, whatever the profile's kernel list says.
  for (const auto& c : expand(f, p, {"*", "", ""}).cases) EXPECT_NE(c.kernel.rfind("mutant.", 0), 0u);
  const auto m = expand(f, p, {"mutant.*", "", ""});
  ASSERT_EQ(m.cases.size(), 12u);
  EXPECT_EQ(m.cases[0].kernel, "mutant.fake");
  p.exclude_recipes = {"bf16"};
  EXPECT_EQ(expand(f, p, {}).cases.size(), 13u);
}

// Stands for a GPU kernel, whose capabilities() query the device (gpu::device_count): counts
// the questions. Named outside fake.* so that no other test's selection reaches it.
std::atomic<int> g_device_queries{0};
class DeviceQueryKernel final : public kernels::Kernel {
 public:
  std::string name() const override { return "counting.device_query"; }
  std::string backend() const override { return "cpu"; }
  std::vector<std::string> recipes() const override { return {"bf16"}; }
  kernels::Capabilities capabilities() const override {
    ++g_device_queries;
    return {};
  }
  void run(const kernels::Args&) override { throw Error("counting.device_query: not for running"); }
};
ATTEST_REGISTER_KERNELS([] {
  std::vector<std::unique_ptr<kernels::Kernel>> v;
  v.push_back(std::make_unique<DeviceQueryKernel>());
  return v;
});

TEST(Expand, KernelsOutsideTheSelectionAreNeverAsked) {
  // The Python gate selects its py.* kernel and forks workers after expanding: asking a GPU
  // kernel's capabilities initialised the CUDA driver in the parent, and every forked worker's
  // CUDA call then failed (issue 33). Selected kernels are asked; the others are not.
  const auto f = CaseFile::parse(kCases, "inline");
  const auto p = Profile::parse(kProfile, "inline");
  const int before = g_device_queries.load();
  EXPECT_EQ(expand(f, p, {"fake.good", "", ""}).cases.size(), 25u);
  EXPECT_EQ(g_device_queries.load(), before);
  (void)expand(f, p, {"counting.*", "", ""});
  EXPECT_GT(g_device_queries.load(), before);
}

TEST(Expand, RepeatedTemplatesGiveEachCaseOnce) {
  const std::string line = "kernel=fake.other problem=b1h1s8d16 check=poison\n";
  EXPECT_EQ(expand(CaseFile::parse(line + line, "dup"), Profile::parse(kProfile, "p"), {}).cases.size(), 2u);  // + refusal
}

}  // namespace
}  // namespace attest::conformance
