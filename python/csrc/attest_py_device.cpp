// Bindings of the conformance engine's device-resident ops (conformance/engine.hpp; docs/python.md
// "Device-resident cases"): JSON requests in, the engine's results out. Tensors arrive as views
// {ptr, dtype, shape, strides, device} of a framework's memory (torch data_ptr/stride, no copy)
// and become attest::TensorRef; every verdict is the engine's.
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "attest/conformance/engine.hpp"
#include "attest/conformance/operands.hpp"
#include "attest/core/status.hpp"
#include "attest/datasets/distributions.hpp"
#include "attest_py_internal.hpp"

namespace attest::py {
namespace {

using nlohmann::json;
using i64 = std::int64_t;
namespace engine = conformance::engine;

// The dtype of a tensor view (torch's names or attest's); with `codes` also the raw 8-bit kinds a
// quantizer hands over (int8, uint8, torch's float8 dtypes).
DType view_dtype(const std::string& dt, const char* name, bool codes) {
  if (codes && (dt == "i8" || dt == "int8")) return DType::i8;
  if (codes && (dt == "u8" || dt == "uint8")) return DType::u8;
  if (codes && (dt == "fp8_e4m3fn" || dt == "float8_e4m3fn")) return DType::fp8_e4m3fn;
  if (codes && (dt == "fp8_e5m2" || dt == "float8_e5m2")) return DType::fp8_e5m2;
  if (dt == "f32" || dt == "float32") return DType::f32;
  if (dt == "bf16" || dt == "bfloat16") return DType::bf16;
  if (dt == "f16" || dt == "float16") return DType::f16;
  throw Error(fmt::format("tensor '{}': dtype '{}' is not {}float32, bfloat16 or float16", name, dt,
                          codes ? "int8, uint8, float8_e4m3fn, float8_e5m2, " : ""));
}

TensorRef view_from(const json& req, const char* name) {
  if (!req.contains(name) || req.at(name).is_null()) throw Error(fmt::format("tensor '{}' is missing", name));
  const json& j = req.at(name);
  TensorRef v;
  const auto ptr = j.at("ptr").get<std::uintptr_t>();
  if (ptr == 0) throw Error(fmt::format("tensor '{}': NULL data pointer", name));
  v.data = reinterpret_cast<const void*>(ptr);
  v.dtype = view_dtype(j.at("dtype").get<std::string>(), name, false);
  const auto shape = j.at("shape").get<std::vector<i64>>(), strides = j.at("strides").get<std::vector<i64>>();
  if (shape.size() != 4 || strides.size() != 4)
    throw Error(fmt::format("tensor '{}': rank {} (strides {}), expected 4", name, shape.size(), strides.size()));
  for (int i = 0; i < 4; ++i) {
    if (shape[i] < 0) throw Error(fmt::format("tensor '{}': negative extent {} in dimension {}", name, shape[i], i));
    v.shape[i] = shape[i];
    v.stride[i] = strides[i];
  }
  v.device = j.value("device", false);
  return v;
}

engine::SampleArgs sample_args(const json& req) {
  engine::SampleArgs a;
  if (req.contains("sample_rows") && !req.at("sample_rows").is_null()) a.rows = req.at("sample_rows").get<i64>();
  if (req.contains("sample_macs") && !req.at("sample_macs").is_null()) a.max_macs = req.at("sample_macs").get<double>();
  a.causal = req.value("causal", a.causal);
  if (a.causal != "top_left" && a.causal != "bottom_right")
    throw Error(fmt::format("causal '{}' is not top_left or bottom_right", a.causal));
  // Input errors (exit 2), unlike a problem the engine does not take (UNSUPPORTED).
  if (a.rows < 1) throw Error(fmt::format("sample_rows {} is not >= 1", a.rows));
  if (!(a.max_macs > 0)) throw Error(fmt::format("sample_macs {} is not > 0", a.max_macs));
  return a;
}

json results_json(const std::vector<conformance::Result>& rs) {
  json a = json::array();
  for (const auto& r : rs) a.push_back(conformance::to_json(r));
  return a;
}

json op_plan(const json& req) {
  const Problem p = parse_problem(req.at("problem").get<std::string>());
  const Recipe r = parse_recipe(req.value("recipe", std::string("bf16")));
  const auto sa = sample_args(req);
  const auto seed = req.value("seed", std::uint64_t{1});
  json j{{"problem",
          {{"batch", p.batch}, {"heads_q", p.heads_q}, {"heads_kv", p.heads_kv}, {"seqlen_q", p.seqlen_q},
           {"seqlen_kv", p.seqlen_kv}, {"head_dim", p.head_dim}, {"head_dim_v", p.head_dim_v},
           {"mask", std::string(mask_name(p.mask))}, {"scale", p.scale()}, {"flops", p.flops()}}}};
  // The engine's one refusal (recipe, emulator on this problem, host memory, plan), as judge() applies it.
  conformance::Case c;
  c.problem = p;
  c.recipe = r;
  c.seed = seed;
  std::string why = engine::refusal(c, sa);
  if (why.empty()) {
    try {
      j["sample"] = engine::plan_json(engine::plan_blocks(p, sa, seed, r.tile_kv), p, seed, sa);
    } catch (const Error& e) {
      why = e.what();
    }
  }
  if (!why.empty()) j["refusal"] = why;
  return j;
}

json op_judge(const json& req, int& rc) {
  engine::JudgeRequest jr;
  jr.c = case_from(req);
  jr.checks = req.value("checks", std::vector<std::string>{"accuracy"});
  for (const auto& ch : jr.checks)
    if (ch != "accuracy" && ch != "bitwise" && ch != "determinism" && ch != "call_path")
      throw Error(fmt::format("device_judge: check '{}' is not accuracy, bitwise, determinism or call_path", ch));
  conformance::ToleranceTable holder;
  jr.tolerances = &tolerances(req, holder);
  jr.sample = sample_args(req);
  if (req.contains("scratch_bytes")) jr.scratch_bytes = req.at("scratch_bytes").get<i64>();
  // A problem the engine does not take: every requested check UNSUPPORTED, no tensors needed.
  if (const auto why = engine::refusal(jr.c, jr.sample); !why.empty()) {
    const auto r = engine::refuse_all(jr.c, jr.checks, why);
    rc = 0;
    return json{{"results", results_json(r.results)}, {"exit_code", 0}};
  }
  for (const auto& ch : jr.checks)
    if (ch == "determinism" || ch == "call_path")
      throw Error("device_judge judges accuracy and bitwise; determinism and call_path are the call log's (device_log_*)");
  jr.q = view_from(req, "q");
  jr.k = view_from(req, "k");
  jr.v = view_from(req, "v");
  jr.out = view_from(req, "out");
  const auto r = engine::judge(jr);
  rc = r.exit_code;
  return json{{"results", results_json(r.results)}, {"exit_code", rc}, {"sample", r.sample}};
}




// Call logs (engine::CallLog) live between ops, keyed by a number the Python side holds; a log
// is judged and dropped by device_log_close. One mutex: Python calls one op at a time anyway.
std::mutex logs_mutex;
std::map<std::int64_t, std::unique_ptr<engine::CallLog>> logs;
std::int64_t next_log = 1;

engine::CallLog& log_of(const json& req) {
  const auto id = req.at("log").get<std::int64_t>();
  const auto it = logs.find(id);
  if (it == logs.end()) throw Error(fmt::format("call log {} is not open", id));
  return *it->second;
}

json op_log(const std::string& op, const json& req, int& rc) {
  std::lock_guard<std::mutex> lock(logs_mutex);
  if (op == "device_log_open") {
    const auto stream = req.value("stream", std::uintptr_t{0});
    logs[next_log] = std::make_unique<engine::CallLog>(req.value("device", false), reinterpret_cast<void*>(stream));
    return json{{"log", next_log++}};
  }
  if (op == "device_log_compare") {
    log_of(req).compare(req.at("check").get<std::string>(), req.at("what").get<std::string>(), view_from(req, "a"),
                        view_from(req, "b"));
    return json::object();
  }
  if (op == "device_log_fingerprint") {
    std::vector<std::pair<std::string, TensorRef>> ins;
    for (const auto& name : req.at("names").get<std::vector<std::string>>()) ins.emplace_back(name, view_from(req, name.c_str()));
    log_of(req).fingerprint(req.at("what").get<std::string>(), ins);
    return json::object();
  }
  // device_log_close: judged (with the case) and dropped, whatever happens.
  const auto id = req.at("log").get<std::int64_t>();
  const auto it = logs.find(id);
  if (it == logs.end()) throw Error(fmt::format("call log {} is not open", id));
  const std::unique_ptr<engine::CallLog> log = std::move(it->second);
  logs.erase(it);
  if (!req.contains("kernel")) return json{{"results", json::array()}, {"exit_code", 0}};  // dropped unjudged
  const auto rows = log->finish(case_from(req));
  rc = 0;
  for (const auto& r : rows)
    if (!conformance::verdict_ok(r.outcome.verdict)) rc = 1;
  return json{{"results", results_json(rows)}, {"exit_code", rc}};
}

// A host tensor of any rank and of dtype int8 / uint8 / float8 / float32 / float16 / bfloat16 as a
// contiguous Tensor (the 8-bit codes kept as they are, the others as f32 values); `dtype` receives
// the view's own dtype.
Tensor host_tensor(const json& req, const char* name, DType* dtype = nullptr) {
  if (!req.contains(name) || req.at(name).is_null()) throw Error(fmt::format("tensor '{}' is missing", name));
  const json& j = req.at(name);
  if (j.value("device", false)) throw Error(fmt::format("tensor '{}': the operands check reads host memory (pass .cpu())", name));
  const auto ptr = j.at("ptr").get<std::uintptr_t>();
  if (ptr == 0) throw Error(fmt::format("tensor '{}': NULL data pointer", name));
  const auto shape = j.at("shape").get<std::vector<i64>>(), strides = j.at("strides").get<std::vector<i64>>();
  if (shape.size() != strides.size() || shape.empty())
    throw Error(fmt::format("tensor '{}': {} extents and {} strides", name, shape.size(), strides.size()));
  for (const i64 e : shape)
    if (e < 0) throw Error(fmt::format("tensor '{}': negative extent {}", name, e));
  const DType src = view_dtype(j.at("dtype").get<std::string>(), name, true);
  if (dtype != nullptr) *dtype = src;
  const bool raw = dtype_size(src) == 1;  // codes: bytes copied as they are
  Tensor t(raw ? src : DType::f32, Shape(shape.begin(), shape.end()));
  TensorRef r;  // element decoding written once (elem::load); the index walk over any rank here
  r.data = reinterpret_cast<const void*>(ptr);
  r.dtype = raw ? DType::f32 : src;
  auto* bytes = reinterpret_cast<std::uint8_t*>(t.raw());
  const i64 n = t.numel();
  bool contiguous = true;
  for (std::size_t d = shape.size(), want = 1; d-- > 0; want *= static_cast<std::size_t>(shape[d]))
    contiguous = contiguous && (shape[d] == 1 || strides[d] == static_cast<i64>(want));
  if (contiguous) {  // the usual case (the Python side passes .contiguous() copies): one pass
#pragma omp parallel for schedule(static)
    for (i64 i = 0; i < n; ++i) {
      if (raw) bytes[i] = static_cast<const std::uint8_t*>(r.data)[i];
      else t.data<float>()[i] = static_cast<float>(elem::load(r, i));
    }
    return t;
  }
  std::vector<i64> idx(shape.size(), 0);
  for (i64 i = 0; i < n; ++i) {
    i64 off = 0;
    for (std::size_t d = 0; d < shape.size(); ++d) off += idx[d] * strides[d];
    if (raw) bytes[i] = static_cast<const std::uint8_t*>(r.data)[off];
    else t.data<float>()[i] = static_cast<float>(elem::load(r, off));
    for (std::size_t d = shape.size(); d-- > 0;)
      if (++idx[d] < shape[d]) break;
      else idx[d] = 0;
  }
  return t;
}

// Check `operands` (conformance/operands.hpp): the kernel's codes, scales and km, host memory.
json op_operands(const json& req, int& rc) {
  const conformance::Case c = case_from(req);
  std::vector<conformance::KernelOperand> ops;
  for (const auto& o : req.at("operands")) {
    conformance::KernelOperand k;
    k.role = o.at("role").get<std::string>();
    k.input = host_tensor(o, "input", &k.input_dtype);
    k.codes = host_tensor(o, "codes");
    k.scales = host_tensor(o, "scales");
    if (o.contains("mean") && !o.at("mean").is_null()) k.mean = host_tensor(o, "mean");
    ops.push_back(std::move(k));
  }
  const auto t0 = std::chrono::steady_clock::now();
  conformance::Outcome out = conformance::judge_operands(c.recipe, req.at("scale").get<double>(), ops);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  rc = conformance::verdict_ok(out.verdict) ? 0 : 1;
  return json{{"results", results_json({engine::make_result(c, "operands", std::move(out), secs)})}, {"exit_code", rc}};
}

json op_generate(const json& req) {
  const Problem p = parse_problem(req.at("problem").get<std::string>());
  const auto t0 = std::chrono::steady_clock::now();
  engine::generate(p, datasets::parse_distribution(req.value("dist", std::string("normal"))), req.value("seed", std::uint64_t{1}),
                   view_from(req, "q"), view_from(req, "k"), view_from(req, "v"));
  return json{{"seconds", std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()}};
}

}  // namespace

bool is_device_op(const std::string& op) { return op.rfind("device_", 0) == 0; }

json op_device(const std::string& op, const json& req, int& rc) {
  rc = 0;
  if (op == "device_info") return engine::info();
  if (op == "device_plan") return op_plan(req);
  if (op == "device_generate") return op_generate(req);
  if (op == "device_judge") return op_judge(req, rc);
  if (op == "device_operands") return op_operands(req, rc);
  if (op.rfind("device_log_", 0) == 0 &&
      (op == "device_log_open" || op == "device_log_compare" || op == "device_log_fingerprint" || op == "device_log_close"))
    return op_log(op, req, rc);
  throw Error("op '" + op +
              "' is not one of device_info, device_plan, device_generate, device_judge, device_operands, device_log_open, device_log_compare, "
              "device_log_fingerprint, device_log_close");
}

}  // namespace attest::py
