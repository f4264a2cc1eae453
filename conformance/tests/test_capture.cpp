// attest check --capture: captures made here from the CPU kernels (cpu.tiled.*) and the recipe
// emulator. Honest captures pass in every form (bshd, bhsd, ragged, fp16, npy directory);
// perturbed ones fail with a reason (noise at 10x the floor, two heads swapped, one KV tile
// dropped, output of the wrong recipe, a corrupted quantization scale); malformed ones are
// attest::Error naming the capture and the defect, and exit 2 through the CLI.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>

#include "attest/conformance/capture.hpp"
#include "attest/core/output_files.hpp"
#include "attest/core/problem.hpp"
#include "attest/core/recipe.hpp"
#include "attest/datasets/distributions.hpp"
#include "attest/datasets/npy.hpp"
#include "attest/kernels/kernel.hpp"
#include "attest/reference/emulate.hpp"
#include "attest/reference/formats.hpp"
#include "attest/reference/quantize.hpp"
#include "attest/testing/run_cli.hpp"
#include "attest/testing/temp_dir.hpp"

namespace attest::conformance {
namespace {

namespace fs = std::filesystem;

// Float32 values (already representable in `f`) as the raw 16-bit codes a framework stores.
Tensor codes16(const Tensor& x, attest::FormatId f, DType t) {
  Tensor out(t, x.shape());
  auto* o = reinterpret_cast<std::uint16_t*>(out.raw());
  const float* p = x.data<float>();
  for (std::int64_t i = 0; i < x.numel(); ++i) o[i] = ref::encode(f, p[i]);
  return out;
}
Tensor round_to(const Tensor& x, attest::FormatId f) {
  Tensor out(DType::f32, x.shape());
  const Tensor c = x.contiguous();
  for (std::int64_t i = 0; i < x.numel(); ++i) out.data<float>()[i] = ref::round_to(f, c.data<float>()[i]);
  return out;
}

struct Made {
  Problem p;
  Tensor q, k, v;  // f32 values of the 16-bit inputs, logical bshd
  Tensor out, lse;
};

Tensor run_kernel(const std::string& kernel, const Problem& p, const std::string& recipe, const Tensor& q, const Tensor& k,
                  const Tensor& v, Tensor* lse_out) {
  auto* kn = kernels::Registry::instance().find(kernel);
  if (!kn) throw Error("test: no kernel " + kernel);
  const Recipe r = parse_recipe(recipe);
  Tensor out(DType::f32, {q.dim(0), q.dim(1), p.heads_q, p.head_dim_v});
  Tensor lse(DType::f32, {q.dim(0), p.heads_q, q.dim(1)});
  const Status st = kn->supports(p, r);
  if (!st) throw Error("test: " + kernel + " refuses " + to_string(p) + ": " + st.reason());
  kn->run(kernels::Args{p, r, q, k, v, out, &lse, ""});
  if (lse_out) *lse_out = lse;
  return out;
}

Made make(const std::string& problem, const std::string& recipe = "bf16", attest::FormatId f = attest::FormatId::bf16, std::uint64_t seed = 1) {
  Made m;
  m.p = parse_problem(problem);
  const auto in = datasets::generate_qkv(m.p, datasets::Distribution::normal, seed);
  m.q = round_to(in.q, f);
  m.k = round_to(in.k, f);
  m.v = round_to(in.v, f);
  m.out = run_kernel("cpu.tiled." + recipe, m.p, recipe, m.q, m.k, m.v, &m.lse);
  return m;
}

Capture capture_of(const Made& m, attest::FormatId f = attest::FormatId::bf16, std::map<std::string, std::string> meta = {}) {
  const DType t = f == attest::FormatId::bf16 ? DType::bf16 : DType::f16;
  Capture c;
  c.source = "test.safetensors";
  c.tensors = {{"q", codes16(m.q, f, t)}, {"k", codes16(m.k, f, t)}, {"v", codes16(m.v, f, t)}, {"out", codes16(m.out, f, t)}};
  if (!m.lse.empty()) c.tensors.push_back({"lse", m.lse});
  c.metadata = std::move(meta);
  return c;
}

Tensor& tensor(Capture& c, const std::string& name) {
  for (auto& t : c.tensors)
    if (t.name == name) return t.tensor;
  throw Error("test: no tensor " + name);
}

double figure(const CaptureResult& r, const char* part, const char* which, const char* metric) {
  return r.accuracy.figures.at(part).at(which).at(metric).get<double>();
}

const char* kProblem = "b1h2k1s64t192d64";

TEST(Capture, HonestBf16CapturePasses) {
  const auto m = make(kProblem);
  const auto r = check_capture(capture_of(m, attest::FormatId::bf16, {{"framework", "test"}, {"kernel", "cpu.tiled.bf16"}}));
  EXPECT_EQ(r.verdict(), Verdict::passed) << r.reason();
  EXPECT_EQ(r.recipe, "bf16");  // from q's dtype
  EXPECT_EQ(r.problem, "b1h2k1s64t192d64");
  EXPECT_EQ(r.framework, "test");
  ASSERT_TRUE(r.accuracy.figures.contains("lse"));  // the captured LSE was judged too
  EXPECT_GT(figure(r, "out", "floor", "rel_l2"), 0.0);
  EXPECT_LE(r.worst_ratio, 1.0);
  // cpu.tiled.bf16 is bitwise the bf16 emulator (its contract), so the capture is too.
  EXPECT_EQ(r.accuracy.figures.at("emulator_bit_mismatches").get<std::int64_t>(), 0);
}

TEST(Capture, LayoutsRaggedAndFp16Pass) {
  const auto m = make(kProblem);
  const auto bshd = check_capture(capture_of(m));
  // The same tensors stored bhsd ([B,H,S,D]) with the layout in the metadata.
  Capture c = capture_of(m, attest::FormatId::bf16, {{"layout", "bhsd"}});
  for (auto& t : c.tensors)
    if (t.tensor.rank() == 4) t.tensor = t.tensor.permute({0, 2, 1, 3}).contiguous();
  const auto bhsd = check_capture(c);
  EXPECT_EQ(bhsd.verdict(), Verdict::passed) << bhsd.reason();
  EXPECT_EQ(figure(bhsd, "out", "measured", "rel_l2"), figure(bshd, "out", "measured", "rel_l2"));
  // A flag overrides the metadata: read as bshd, the bhsd tensors are inconsistent.
  CaptureOptions as_bshd;
  as_bshd.layout = "bshd";
  EXPECT_THROW(check_capture(c, as_bshd), Error);

  // Ragged: FlashAttention varlen tensors [total, H, D] with cu_seqlens.
  const auto rg = make("b2h4k2s56t70d64:cu_q=0,40,96:cu_kv=0,70,128");
  Capture cr = capture_of(rg);
  for (auto& t : cr.tensors)
    if (t.name != "lse") {
      Tensor r3(t.tensor.dtype(), {t.tensor.dim(1), t.tensor.dim(2), t.tensor.dim(3)});
      std::memcpy(r3.raw(), t.tensor.raw(), static_cast<std::size_t>(r3.numel()) * dtype_size(r3.dtype()));
      t.tensor = r3;
    }
  Tensor cu_q(DType::i32, {3}), cu_k(DType::i64, {3});
  const int cq[] = {0, 40, 96};
  const std::int64_t ck[] = {0, 70, 128};
  std::memcpy(cu_q.raw(), cq, sizeof cq);
  std::memcpy(cu_k.raw(), ck, sizeof ck);
  cr.tensors.push_back({"cu_seqlens_q", cu_q});
  cr.tensors.push_back({"cu_seqlens_k", cu_k});
  const auto rr = check_capture(cr);
  EXPECT_EQ(rr.verdict(), Verdict::passed) << rr.reason();
  EXPECT_NE(rr.problem.find("cu_q=0,40,96"), std::string::npos) << rr.problem;

  // fp16: the recipe follows q's dtype.
  const auto h = make(kProblem, "fp16", attest::FormatId::fp16);
  const auto rh = check_capture(capture_of(h, attest::FormatId::fp16));
  EXPECT_EQ(rh.recipe, "fp16");
  EXPECT_EQ(rh.verdict(), Verdict::passed) << rh.reason();
}

TEST(Capture, NoiseAtTenTimesTheFloorFails) {
  const auto m = make(kProblem);
  const auto honest = check_capture(capture_of(m));
  const double floor_rmse = figure(honest, "out", "floor", "rmse");
  ASSERT_GT(floor_rmse, 0.0);
  Made noisy = m;
  noisy.out = Tensor(DType::f32, m.out.shape());
  std::mt19937_64 rng(7);
  std::normal_distribution<double> n(0.0, 10 * floor_rmse);
  for (std::int64_t i = 0; i < m.out.numel(); ++i)
    noisy.out.data<float>()[i] = ref::round_to(attest::FormatId::bf16, static_cast<float>(m.out.data<float>()[i] + n(rng)));
  const auto r = check_capture(capture_of(noisy));
  EXPECT_EQ(r.verdict(), Verdict::failed);
  EXPECT_NE(r.reason().find("> bound"), std::string::npos) << r.reason();
  EXPECT_GT(r.worst_ratio, 1.0);
}

TEST(Capture, TwoHeadsSwappedFail) {
  Made m = make(kProblem);
  Tensor o = m.out.contiguous();
  auto view = o.view<float, 4>();
  for (std::int64_t b = 0; b < o.dim(0); ++b)
    for (std::int64_t s = 0; s < o.dim(1); ++s)
      for (std::int64_t d = 0; d < o.dim(3); ++d) std::swap(view(b, s, 0, d), view(b, s, 1, d));
  m.out = o;
  const auto r = check_capture(capture_of(m));
  EXPECT_EQ(r.verdict(), Verdict::failed);
  EXPECT_NE(r.reason().find("accuracy: "), std::string::npos) << r.reason();
}

TEST(Capture, OneKvTileDroppedFails) {
  // The kernel's output when keys 64..127 (its second 64-key tile) never reached it.
  Made m = make(kProblem);
  const Problem p = m.p;
  Problem short_p = p;
  short_p.seqlen_kv = p.seqlen_kv - 64;
  auto drop = [&](const Tensor& x) {
    Tensor y(DType::f32, {x.dim(0), x.dim(1) - 64, x.dim(2), x.dim(3)});
    auto xv = x.view<float, 4>();
    auto yv = y.view<float, 4>();
    for (std::int64_t b = 0; b < y.dim(0); ++b)
      for (std::int64_t t = 0; t < y.dim(1); ++t)
        for (std::int64_t h = 0; h < y.dim(2); ++h)
          for (std::int64_t d = 0; d < y.dim(3); ++d) yv(b, t, h, d) = xv(b, t < 64 ? t : t + 64, h, d);
    return y;
  };
  m.out = run_kernel("cpu.tiled.bf16", short_p, "bf16", m.q, drop(m.k), drop(m.v), &m.lse);
  const auto r = check_capture(capture_of(m));
  EXPECT_EQ(r.verdict(), Verdict::failed);
  EXPECT_FALSE(r.reason().empty());
}

TEST(Capture, OutputOfTheWrongRecipeFails) {
  // The Sage INT8/FP8 recipe's output presented as a bf16 kernel's (the metadata says bf16).
  Made m = make(kProblem);
  m.out = round_to(ref::emulate(m.p, parse_recipe("sage_int8_fp8_perblock"), m.q, m.k, m.v).out, attest::FormatId::bf16);
  m.lse = Tensor();
  const auto r = check_capture(capture_of(m, attest::FormatId::bf16, {{"recipe", "bf16"}}));
  EXPECT_EQ(r.verdict(), Verdict::failed);
  EXPECT_NE(r.reason().find("> bound"), std::string::npos) << r.reason();
  // Judged as what it is, the same output passes.
  CaptureOptions sage;
  sage.recipe = "sage_int8_fp8_perblock";
  const auto rs = check_capture(capture_of(m, attest::FormatId::bf16, {{"recipe", "bf16"}}), sage);
  EXPECT_EQ(rs.recipe, "sage_int8_fp8_perblock");
  EXPECT_EQ(rs.verdict(), Verdict::passed) << rs.reason();
}

TEST(Capture, QuantizedOperandsAreComparedBitwise) {
  Made m = make(kProblem, "bf16");
  const Recipe sage = parse_recipe("sage_int8_fp8_perblock");
  m.out = round_to(ref::emulate(m.p, sage, m.q, m.k, m.v).out, attest::FormatId::bf16);
  m.lse = Tensor();
  ref::QuantInputs qi;
  qi.sm_scale = m.p.scale();
  const auto qq = ref::quantize(m.q.permute({0, 2, 1, 3}), sage.q, qi);
  Capture c = capture_of(m, attest::FormatId::bf16, {{"recipe", "sage_int8_fp8_perblock"}});
  c.tensors.push_back({"q_codes", qq.codes.permute({0, 2, 1, 3}).contiguous()});  // bshd like q
  c.tensors.push_back({"q_scales", qq.scales});
  const auto r = check_capture(c);
  ASSERT_TRUE(r.quantized.has_value());
  EXPECT_EQ(r.quantized->verdict, Verdict::passed) << r.quantized->reason;
  EXPECT_EQ(r.verdict(), Verdict::passed) << r.reason();
  // One scale off by one ulp: caught, and named.
  Tensor& s = tensor(c, "q_scales");
  s.data<float>()[1] = std::nextafter(s.data<float>()[1], 1e30f);
  const auto bad = check_capture(c);
  EXPECT_EQ(bad.verdict(), Verdict::failed);
  EXPECT_NE(bad.reason().find("q_scales: 1 of"), std::string::npos) << bad.reason();
}

void expect_malformed(const Capture& c, const std::string& defect, const CaptureOptions& opt = {}) {
  try {
    (void)check_capture(c, opt);
    FAIL() << "accepted a capture that should fail with: " << defect;
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.rfind("test.safetensors: ", 0), 0u) << msg;
    EXPECT_NE(msg.find(defect), std::string::npos) << msg;
  }
}

TEST(Capture, MalformedCapturesNameTheDefect) {
  const auto m = make("b1h2s64d64");
  Capture c = capture_of(m);
  Capture missing = c;
  missing.tensors.erase(missing.tensors.begin() + 3);
  expect_malformed(missing, "required tensor 'out' is missing");
  Capture extra = c;
  extra.tensors.push_back({"qq", Tensor(DType::f32, {1})});
  expect_malformed(extra, "tensor 'qq' is not a capture tensor name");
  Capture bad_v = c;
  tensor(bad_v, "v") = Tensor(DType::bf16, {1, 64, 2, 32, 1});
  expect_malformed(bad_v, "tensor 'v' has shape [1, 64, 2, 32, 1], need rank 4");
  tensor(bad_v, "v") = Tensor(DType::bf16, {1, 63, 2, 64});
  expect_malformed(bad_v, "tensor 'v' has shape [1, 63, 2, 64], expected [1, 64, 2, 64]");
  Capture int_q = c;
  tensor(int_q, "q") = Tensor(DType::i32, {1, 64, 2, 64});
  expect_malformed(int_q, "tensor 'q' has dtype i32, need a float dtype");
  Capture bad_lse = c;
  tensor(bad_lse, "lse") = Tensor(DType::f32, {1, 2, 63});
  expect_malformed(bad_lse, "tensor 'lse' has shape [1, 2, 63]");
  expect_malformed(capture_of(m, attest::FormatId::bf16, {{"layout", "sbhd"}}), "sbhd");
  expect_malformed(capture_of(m, attest::FormatId::bf16, {{"scale", "abc"}}), "scale 'abc' is not a finite number > 0");
  expect_malformed(capture_of(m, attest::FormatId::bf16, {{"recipe", "nope"}}), "nope");
  expect_malformed(capture_of(m, attest::FormatId::bf16, {{"mask", "diagonal"}}), "diagonal");
  Capture half_cu = c;
  half_cu.tensors.push_back({"cu_seqlens_q", Tensor(DType::i32, {2})});
  expect_malformed(half_cu, "cu_seqlens_q and cu_seqlens_k must be given together");
}

// ---- the CLI: exit codes, directory summary, reports ----

using attest::testing::run_cli;

class CaptureCli : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::create_directories(dir_ / "run");
    const auto m = make("b1h2s64t128d64");
    OutputFiles out;
    write_capture(out, dir_ / "run" / "layer0.safetensors", capture_of(m, attest::FormatId::bf16, {{"framework", "test"}}));
    Made swapped = m;
    Tensor o = m.out.contiguous();
    auto v = o.view<float, 4>();
    for (std::int64_t s = 0; s < o.dim(1); ++s)
      for (std::int64_t d = 0; d < o.dim(3); ++d) std::swap(v(0, s, 0, d), v(0, s, 1, d));
    swapped.out = o;
    write_capture(out, dir_ / "run" / "layer1.safetensors", capture_of(swapped));
    out.commit();
    // An npy capture directory with metadata.json.
    fs::create_directories(dir_ / "run" / "layer2");
    OutputFiles npy;
    const Capture c = capture_of(m);
    for (const auto& t : c.tensors) datasets::write_npy(npy, dir_ / "run" / "layer2" / (t.name + ".npy"),
                                                        t.tensor.dtype() == DType::bf16 ? round_to_f32(t.tensor) : t.tensor);
    npy.stage(dir_ / "run" / "layer2" / "metadata.json", std::string(R"({"recipe": "bf16", "framework": "npy"})"));
    npy.commit();
  }
  // npy has no bf16: the npy capture stores the bf16 values as f32 (exact).
  static Tensor round_to_f32(const Tensor& bf) {
    Tensor out(DType::f32, bf.shape());
    const auto* p = reinterpret_cast<const std::uint16_t*>(bf.raw());
    for (std::int64_t i = 0; i < bf.numel(); ++i) out.data<float>()[i] = ref::decode(attest::FormatId::bf16, p[i]);
    return out;
  }
  attest::testing::TempDir dir_{"capture"};
};

TEST_F(CaptureCli, ExitCodesAndReports) {
  attest::testing::CliRun cli;
  cli = run_cli("check --capture " + (dir_ / "run" / "layer0.safetensors").string());
  EXPECT_EQ(cli.code, 0) << cli.out;
  EXPECT_NE(cli.out.find("verdict: passed"), std::string::npos) << cli.out;
  cli = run_cli("check --capture " + (dir_ / "run" / "layer2").string());
  EXPECT_EQ(cli.code, 0) << cli.out;
  cli = run_cli("check --capture " + (dir_ / "run" / "layer1.safetensors").string());
  EXPECT_EQ(cli.code, 1) << cli.out;
  EXPECT_NE(cli.out.find("verdict: failed"), std::string::npos) << cli.out;

  const auto json = dir_ / "r.json", md = dir_ / "r.md";
  cli =
      run_cli("check --capture " + (dir_ / "run").string() + " --json " + json.string() + " --markdown " + md.string());
  EXPECT_EQ(cli.code, 1) << cli.out;
  std::ifstream mf(md);
  const std::string mds{std::istreambuf_iterator<char>(mf), std::istreambuf_iterator<char>()};
  EXPECT_NE(mds.find("## attest check: FAIL (3 captures: 1 failed, 2 passed)"), std::string::npos) << mds;
  EXPECT_NE(mds.find("| layer1.safetensors |"), std::string::npos) << mds;
  EXPECT_NE(mds.find("### Worst 3 by measured / bound"), std::string::npos) << mds;
  // The worst case is listed first.
  EXPECT_LT(mds.find("- " + (dir_ / "run" / "layer1.safetensors").string()), mds.find("- " + (dir_ / "run" / "layer0.safetensors").string()));
  std::ifstream jf(json);
  const auto j = nlohmann::json::parse(jf);
  EXPECT_EQ(j.at("captures").size(), 3u);
  EXPECT_EQ(j.at("counts").at("failed").get<int>(), 1);

  // Malformed: a truncated file exits 2 with one line naming it; in a directory the others are
  // still checked and the run exits 2.
  std::string bytes;
  {
    std::ifstream f(dir_ / "run" / "layer0.safetensors", std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  }
  {
    std::ofstream f(dir_ / "run" / "layer3.safetensors", std::ios::binary);
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size() - 10));
  }
  cli = run_cli("check --capture " + (dir_ / "run" / "layer3.safetensors").string());
  EXPECT_EQ(cli.code, 2) << cli.out;
  EXPECT_NE(cli.out.find("layer3.safetensors: "), std::string::npos) << cli.out;
  EXPECT_NE(cli.out.find("run past the data section"), std::string::npos) << cli.out;
  cli = run_cli("check --capture " + (dir_ / "run").string() + " --markdown " + md.string());
  EXPECT_EQ(cli.code, 2) << cli.out;
  EXPECT_NE(cli.out.find("malformed"), std::string::npos) << cli.out;
  cli = run_cli("check --capture " + (dir_ / "nothing").string());
  EXPECT_EQ(cli.code, 2) << cli.out;
  cli = run_cli("check --capture " + (dir_ / "run" / "layer0.safetensors").string() + " --layout sbhd");
  EXPECT_EQ(cli.code, 2) << cli.out;
}

// The Python helper (scripts/python/attest_capture.py, numpy only) writes captures that the
// CLI reads and passes: float64 numpy attention rounded to float32, bshd, bhsd and the
// every-Nth-call wrapper.
TEST_F(CaptureCli, PythonHelperCapturesPass) {
  std::string python;
  for (const char* cand : {"/usr/bin/python3", "python3"})
    if (attest::testing::run_command(std::string(cand) + " -c 'import numpy'").code == 0) {
      python = cand;
      break;
    }
  if (python.empty()) GTEST_SKIP() << "no python3 with numpy (scripts/setup installs python3-numpy)";
  const auto py = dir_ / "py";
  const auto selftest = attest::testing::run_command(python + " " + ATTEST_PY_CAPTURE + " --selftest " + py.string());
  ASSERT_EQ(selftest.code, 0) << selftest.out;
  const auto json = dir_ / "py.json";
  const auto cli = run_cli("check --capture " + py.string() + " --json " + json.string());
  EXPECT_EQ(cli.code, 0) << cli.out;
  std::ifstream jf(json);
  const auto j = nlohmann::json::parse(jf);
  EXPECT_EQ(j.at("counts").at("passed").get<int>(), 4) << cli.out;
  for (const auto& c : j.at("captures")) EXPECT_EQ(c.at("recipe").get<std::string>(), "f32");
}

}  // namespace
}  // namespace attest::conformance
