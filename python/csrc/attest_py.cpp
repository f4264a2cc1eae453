// libattest_py: the callback kernel (a Python callable as a registry kernel), the gate / run_case /
// list requests and the direct call of registered C++ kernels. Every verdict comes from the C++
// engine (run_gate, run_cases, the check registry); this file only adapts.
#include "attest_py.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "attest/conformance/case.hpp"
#include "attest/conformance/engine.hpp"
#include "attest/conformance/gate.hpp"
#include "attest/conformance/suite.hpp"
#include "attest/conformance/tolerance.hpp"
#include "attest/core/status.hpp"
#include "attest/kernels/kernel.hpp"
#include "attest/kernels/plugin_abi.hpp"
#include "attest_py_internal.hpp"

namespace attest::py {
namespace {

using nlohmann::json;
using kernels::Kernel;

bool valid_name(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-';
  });
}

// The description of a callback kernel, owned here (the Python objects behind the pointers stay
// alive on the Python side for as long as the kernel is bound).
struct Desc {
  std::string backend;
  std::vector<std::string> recipes, configs;
  std::vector<std::int64_t> head_dims;
  std::uint32_t masks = 0, layouts = 0, dtypes = 0, flags = 0, declares = 0, row_align = 0;
  std::string accepts;  // "check=why" lines (copied: the caller's string need not outlive the call)
  attest_plugin_run_fn run = nullptr;
  attest_plugin_supports_fn supports = nullptr;
  void* context = nullptr;
};

std::shared_ptr<const Desc> make_desc(const std::string& full, const attest_plugin_kernel& given) {
  const auto fail = [&](const std::string& what) { throw Error("kernel " + full + ": " + what); };
  if (given.struct_size < ATTEST_PLUGIN_KERNEL_V1_MIN_SIZE) fail("attest_plugin_kernel.struct_size is too small");
  // declares/row_align only when the caller's struct_size covers them (0 otherwise).
  const attest_plugin_kernel k = kernels::plugin_abi::copy_kernel(given);
  if ((k.declares & ~ATTEST_PLUGIN_DECLARE_ALL) != 0)
    fail("declares " + std::to_string(k.declares) + " holds unknown ATTEST_PLUGIN_DECLARE bits");
  if (k.memory != ATTEST_PLUGIN_MEMORY_HOST) fail("memory must be HOST (the Python side moves tensors to its device)");
  if (k.run == nullptr) fail("run is NULL");
  if (k.n_recipes == 0 || k.recipes == nullptr) fail("lists no recipe");
  if (k.masks == 0 || (k.masks & ~7u) != 0) fail("masks bits " + std::to_string(k.masks) + " are empty or unknown");
  if (k.layouts == 0 || (k.layouts & ~15u) != 0) fail("layouts bits " + std::to_string(k.layouts) + " are empty or unknown");
  if ((k.flags & ~ATTEST_PLUGIN_CAP_ALL) != 0) fail("unknown capability flags " + std::to_string(k.flags));
  auto d = std::make_shared<Desc>();
  d->backend = k.backend != nullptr && *k.backend != '\0' ? k.backend : "python";
  for (std::uint32_t i = 0; i < k.n_recipes; ++i) {
    if (k.recipes[i] == nullptr) fail("recipes[" + std::to_string(i) + "] is NULL");
    try {
      d->recipes.push_back(recipe_label(parse_recipe(k.recipes[i])));
    } catch (const Error& e) {
      fail("recipes[" + std::to_string(i) + "]: " + e.what());
    }
  }
  d->configs.emplace_back();
  for (std::uint32_t i = 0; i < k.n_configs; ++i) {
    if (k.configs == nullptr || k.configs[i] == nullptr) fail("configs[" + std::to_string(i) + "] is NULL");
    if (*k.configs[i] != '\0') d->configs.emplace_back(k.configs[i]);
  }
  for (std::uint32_t i = 0; i < k.n_head_dims; ++i) {
    if (k.head_dims == nullptr || k.head_dims[i] < 1) fail("head_dims[" + std::to_string(i) + "] is not >= 1");
    d->head_dims.push_back(k.head_dims[i]);
  }
  d->masks = k.masks;
  d->layouts = k.layouts;
  d->dtypes = k.dtypes;
  d->flags = k.flags;
  d->declares = k.declares;
  d->row_align = k.row_align;
  d->accepts = k.accepts != nullptr ? k.accepts : "";
  (void)kernels::plugin_abi::capabilities({}, 1, 1, 0, 0, 0, d->accepts.c_str());  // malformed lines: an input error now
  d->run = k.run;
  d->supports = k.supports;
  d->context = k.context;
  return d;
}

class CallbackKernel final : public Kernel {
 public:
  CallbackKernel(std::string name, std::shared_ptr<const Desc> d) : name_(std::move(name)), d_(std::move(d)) {}

  void rebind(std::shared_ptr<const Desc> d) {
    const std::lock_guard<std::mutex> lock(mu_);
    d_ = std::move(d);
  }
  std::shared_ptr<const Desc> desc() const {
    const std::lock_guard<std::mutex> lock(mu_);
    return d_;
  }

  std::string name() const override { return name_; }
  std::string backend() const override { return "python:" + desc()->backend; }
  std::vector<std::string> recipes() const override { return desc()->recipes; }
  std::vector<std::string> configs() const override { return desc()->configs; }
  kernels::Capabilities capabilities() const override {
    const auto d = desc();
    return kernels::plugin_abi::capabilities(d->head_dims, d->masks, d->layouts, d->flags, d->declares, d->row_align,
                                             d->accepts.c_str());
  }

  Status supports(const Problem& p, const Recipe& r) const override {
    if (auto st = Kernel::supports(p, r); !st) return st;
    const auto d = desc();
    return kernels::plugin_abi::supports(d->supports, d->context, d->dtypes, p, r);
  }

  void run(const kernels::Args& a) override {
    if (auto st = supports(a.problem, a.recipe); !st) throw Error(name_ + ": " + st.reason());
    const auto d = desc();
    const kernels::plugin_abi::RunArgsC c(a);
    // Python callables hold the GIL anyway; one at a time (unless thread-safe) keeps device state simple too.
    std::string message;
    if (const int rc = kernels::plugin_abi::call(d->run, d->context, d->flags, serial_, c.ra, message); rc != 0)
      kernels::plugin_abi::throw_run_failure(rc, message, "python kernel " + name_ + " raised (" + std::to_string(rc) + "): ");
  }

 private:
  std::string name_;
  mutable std::mutex mu_;
  std::mutex serial_;
  std::shared_ptr<const Desc> d_;
};

char* dup(const std::string& s) {
  char* p = static_cast<char*>(std::malloc(s.size() + 1));
  if (p != nullptr) std::memcpy(p, s.c_str(), s.size() + 1);
  return p;
}

int reply_error(char** reply, const std::string& what) {
  if (reply != nullptr) *reply = dup(json{{"error", what}}.dump());
  return 2;
}

// ---- strided host copies between caller memory and attest tensors (rank <= 4, float32) ----

std::int64_t storage_extent(const attest_plugin_tensor& t) {
  std::int64_t hi = 0;
  for (int d = 0; d < t.rank; ++d) {
    if (t.shape[d] == 0) return 0;
    if (t.strides[d] < 0) throw Error("negative strides are not supported");
    hi += (t.shape[d] - 1) * t.strides[d];
  }
  return hi + 1;
}

template <class F>
void for_each_index(const attest_plugin_tensor& t, F&& f) {
  std::int64_t idx[4] = {0, 0, 0, 0}, ext[4] = {1, 1, 1, 1};
  if (t.rank < 1 || t.rank > 4) throw Error("tensor rank " + std::to_string(t.rank) + " is not 1..4");
  for (int d = 0; d < t.rank; ++d) ext[d] = t.shape[d];
  for (idx[0] = 0; idx[0] < ext[0]; ++idx[0])
    for (idx[1] = 0; idx[1] < ext[1]; ++idx[1])
      for (idx[2] = 0; idx[2] < ext[2]; ++idx[2])
        for (idx[3] = 0; idx[3] < ext[3]; ++idx[3]) {
          std::int64_t off = 0;
          for (int d = 0; d < t.rank; ++d) off += idx[d] * t.strides[d];
          f(off);
        }
}

Tensor to_tensor(const attest_plugin_tensor& c, const char* what) {
  if (c.dtype != ATTEST_PLUGIN_DTYPE_F32) throw Error(std::string(what) + ": dtype must be float32");
  Shape shape(c.shape, c.shape + c.rank), strides(c.strides, c.strides + c.rank);
  Tensor t = Tensor::strided(DType::f32, shape, strides, 0, std::max<std::int64_t>(storage_extent(c), 1));
  const float* src = static_cast<const float*>(c.data);
  float* dst = t.data<float>();
  for_each_index(c, [&](std::int64_t off) { dst[off] = src[off]; });
  return t;
}

void from_tensor(const Tensor& t, const attest_plugin_tensor& c) {
  const float* src = t.data<float>();
  float* dst = static_cast<float*>(c.data);
  for_each_index(c, [&](std::int64_t off) { dst[off] = src[off]; });
}

}  // namespace

kernels::Kernel& find_kernel(const std::string& name) {
  auto* k = kernels::Registry::instance().find(name);
  if (k == nullptr) throw Error("kernel '" + name + "' is not registered (attest.list('kernels') names them)");
  return *k;
}

json parse_request(const char* text) {
  if (text == nullptr) throw Error("request is NULL");
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    throw Error(std::string("request is not JSON: ") + e.what());
  }
}

conformance::CaseFile case_file(const json& req, const conformance::Profile& profile) {
  if (req.contains("cases_text"))
    return conformance::CaseFile::parse(req.at("cases_text").get<std::string>(), "cases");
  return conformance::CaseFile::load(req.value("cases", profile.cases));
}

const conformance::ToleranceTable& tolerances(const json& req, conformance::ToleranceTable& holder) {
  if (req.contains("tolerances") && !req.at("tolerances").is_null()) {
    holder = conformance::ToleranceTable::load(req.at("tolerances").get<std::string>());
    return holder;
  }
  return conformance::ToleranceTable::builtin();
}

namespace {

// The request's oracles (docs/python.md "device='cuda'"): "device" has the C++ checks take their
// FP64 reference, floor and comparisons from the device engine (CheckOptions::device_oracles);
// "host" (the default) judges on the host as `attest gate` does.
void oracles(const json& req, conformance::CheckOptions& c) {
  const std::string where = req.value("oracles", std::string("host"));
  if (where != "host" && where != "device") throw Error("oracles '" + where + "' is not host or device");
  c.device_oracles = where == "device";
  if (c.device_oracles && !conformance::engine::has_device_backend())
    throw Error("device='cuda' judges on the device engine, and this libattest_py was built without CUDA (ATTEST_GPU=none): "
                "install the CUDA build (ATTEST_GPU=cuda pip install ./python, or scripts/device/build py-cuda)");
  if (req.contains("sample_macs") && !req.at("sample_macs").is_null()) c.device_sample_macs = req.at("sample_macs").get<double>();
  if (!(c.device_sample_macs > 0)) throw Error("sample_macs must be > 0");
}

json op_gate(const json& req, int& rc) {
  conformance::GateOptions opt;
  opt.profile = conformance::Profile::load(req.value("profile", std::string("cpu")));
  const std::string kernel = req.at("kernel").get<std::string>();
  find_kernel(kernel);
  // The profile contributes its fp8/MX flavour and recipe lists; the kernel list is this one kernel.
  opt.profile.kernels = {kernel};
  opt.profile.required = {kernel};
  opt.cases = case_file(req, opt.profile);
  opt.selection.kernel = kernel;
  opt.selection.recipe = req.value("recipe_glob", std::string());
  opt.selection.check = req.value("check", std::string());
  opt.jobs = req.value("jobs", 1);
  opt.check.determinism_runs = req.value("reruns", 5);
  oracles(req, opt.check);
  conformance::ToleranceTable tol;
  if (req.contains("tolerances") && !req.at("tolerances").is_null()) {
    tol = conformance::ToleranceTable::load(req.at("tolerances").get<std::string>());
    opt.tolerances = &tol;
  }
  const auto report = conformance::run_gate(opt);
  rc = report.exit_code();
  json j;
  j["report"] = conformance::json_report(report);
  j["markdown"] = conformance::markdown_report(report);
  j["junit"] = conformance::junit_report(report);
  j["summary"] = conformance::summary_table(report);
  j["exit_code"] = rc;
  return j;
}

json op_run_case(const json& req, int& rc) {
  const auto c = conformance::parse_case(req.at("descriptor").get<std::string>());
  find_kernel(c.kernel);
  conformance::ToleranceTable holder;
  const auto& tol = tolerances(req, holder);
  conformance::CheckOptions copt;
  copt.determinism_runs = req.value("reruns", 5);
  oracles(req, copt);
  const auto results = conformance::run_cases({c}, tol, copt);
  json j;
  j["results"] = json::array();
  rc = 0;
  std::string dump;
  for (const auto& r : results) {
    j["results"].push_back(conformance::to_json(r));
    dump += conformance::dump_result(r);
    if (!conformance::verdict_ok(r.outcome.verdict)) rc = 1;
  }
  j["dump"] = dump;
  j["exit_code"] = rc;
  return j;
}

json op_list(const json& req) {
  const std::string what = req.at("what").get<std::string>();
  json j = json::array();
  if (what == "kernels") {
    for (const auto& k : kernels::Registry::instance().all()) j.push_back(k->name());
  } else if (what == "recipes") {
    for (const auto& r : named_recipes())
      j.push_back({{"name", r.name}, {"definition", r.definition}, {"summary", r.summary}});
  } else if (what == "checks") {
    for (const auto* c : conformance::all_checks()) j.push_back({{"name", c->name()}, {"summary", c->summary()}});
  } else if (what == "cases") {
    for (const auto& n : conformance::CaseFile::builtin_names()) j.push_back(n);
  } else if (what == "profiles") {
    for (const auto& n : conformance::Profile::builtin_names()) j.push_back(n);
  } else {
    throw Error("list: '" + what + "' is not one of kernels, recipes, checks, cases, profiles");
  }
  return json{{"items", j}};
}

json op_kernel_info(const json& req) {
  auto& k = find_kernel(req.at("kernel").get<std::string>());
  const auto c = k.capabilities();
  json masks = json::array(), layouts = json::array();
  for (auto m : c.masks) masks.push_back(std::string(mask_name(m)));
  for (auto l : c.layouts) layouts.push_back(std::string(layout_name(l)));
  return json{{"name", k.name()},       {"backend", k.backend()},   {"recipes", k.recipes()},
              {"configs", k.configs()}, {"head_dims", c.head_dims}, {"masks", masks},
              {"layouts", layouts},     {"gqa", c.gqa},             {"cross", c.cross},
              {"ragged", c.ragged},     {"head_dim_v", c.head_dim_v}, {"lse", c.lse},
              {"deterministic", c.deterministic}, {"bitwise", c.bitwise}, {"ftz", c.ftz},
              {"row_align", c.row_align}, {"causal_cross", c.causal_cross}};
}

json op_supports(const json& req) {
  auto& k = find_kernel(req.at("kernel").get<std::string>());
  const auto st = k.supports(parse_problem(req.at("problem").get<std::string>()),
                             parse_recipe(req.at("recipe").get<std::string>()));
  return json{{"ok", static_cast<bool>(st)}, {"reason", st ? std::string() : st.reason()}};
}

}  // namespace
}  // namespace attest::py

using namespace attest;

extern "C" {

int attest_py_abi_version(void) { return ATTEST_PY_ABI_VERSION; }

void attest_py_free(char* p) { std::free(p); }

int attest_py_register(const char* name, const attest_plugin_kernel* kernel, char** reply) {
  try {
    if (name == nullptr || !py::valid_name(name)) throw Error("kernel name is empty or not [A-Za-z0-9_.-]+");
    if (kernel == nullptr) throw Error("kernel description is NULL");
    const std::string full = std::string("py.") + name;
    auto desc = py::make_desc(full, *kernel);
    static std::mutex mu;
    const std::lock_guard<std::mutex> lock(mu);
    auto& reg = kernels::Registry::instance();
    if (auto* k = reg.find(full); k != nullptr) {
      auto* cb = dynamic_cast<py::CallbackKernel*>(k);
      if (cb == nullptr) throw Error("kernel " + full + " is registered and is not a Python kernel");
      cb->rebind(std::move(desc));
    } else {
      reg.add(std::make_unique<py::CallbackKernel>(full, std::move(desc)));
    }
    if (reply != nullptr) *reply = py::dup(nlohmann::json{{"kernel", full}}.dump());
    return 0;
  } catch (const std::exception& e) {
    return py::reply_error(reply, e.what());
  }
}

int attest_py_call(const char* request_json, char** reply) {
  try {
    const auto req = py::parse_request(request_json);
    const std::string op = req.value("op", std::string());
    int rc = 0;
    nlohmann::json j;
    if (op == "gate") {
      j = py::op_gate(req, rc);
    } else if (op == "run_case") {
      j = py::op_run_case(req, rc);
    } else if (op == "list") {
      j = py::op_list(req);
    } else if (op == "build") {
      // What this library was built with (compile time: starts no device runtime in the caller).
      j = nlohmann::json{{"gpu_backend", conformance::engine::has_device_backend()}};
    } else if (op == "merge") {
      j = py::op_merge(req, rc);
    } else if (op == "ladder") {
      j = py::op_ladder(req, rc);
    } else if (op == "pair") {
      j = py::op_pair(req, rc);
    } else if (op == "kernel_info") {
      j = py::op_kernel_info(req);
    } else if (op == "supports") {
      j = py::op_supports(req);
    } else if (op == "ladder_verdict") {
      j = py::op_ladder_verdict(req, rc);
    } else if (py::is_device_op(op)) {
      j = py::op_device(op, req, rc);
    } else {
      throw Error("op '" + op + "' is not one of gate, run_case, list, build, merge, ladder, ladder_verdict, pair, kernel_info, supports, device_*");
    }
    if (reply != nullptr) *reply = py::dup(j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    return rc;
  } catch (const nlohmann::json::exception& e) {
    return py::reply_error(reply, std::string("request: ") + e.what());
  } catch (const std::exception& e) {
    return py::reply_error(reply, e.what());
  }
}

int attest_py_kernel_run(const char* kernel, const char* recipe, const char* problem, const attest_plugin_run_args* a,
                         char** reply) {
  try {
    if (kernel == nullptr || recipe == nullptr || problem == nullptr || a == nullptr) throw Error("NULL argument");
    auto& k = py::find_kernel(kernel);
    const Problem p = parse_problem(problem);
    const Recipe r = parse_recipe(recipe);
    if (auto st = k.supports(p, r); !st) throw Error(std::string(kernel) + " refuses " + problem + ": " + st.reason());
    if (a->q == nullptr || a->k == nullptr || a->v == nullptr || a->out == nullptr) throw Error("q, k, v and out are required");
    const Tensor q = py::to_tensor(*a->q, "q"), kk = py::to_tensor(*a->k, "k"), v = py::to_tensor(*a->v, "v");
    Tensor out = py::to_tensor(*a->out, "out"), lse;
    if (a->lse != nullptr) lse = py::to_tensor(*a->lse, "lse");
    const std::string config = a->config != nullptr ? a->config : "";
    k.run(kernels::Args{p, r, q, kk, v, out, a->lse != nullptr ? &lse : nullptr, config});
    py::from_tensor(out, *a->out);
    if (a->lse != nullptr) py::from_tensor(lse, *a->lse);
    if (reply != nullptr) *reply = nullptr;
    return 0;
  } catch (const std::exception& e) {
    return py::reply_error(reply, e.what());
  }
}

}  // extern "C"
