#pragma once
// Shared between the two translation units of libattest_py (not a public header).
#include <string>

#include <nlohmann/json.hpp>

#include "attest/conformance/engine.hpp"
#include "attest/conformance/suite.hpp"
#include "attest/conformance/tolerance.hpp"
#include "attest/conformance/verdict.hpp"
#include "attest/core/tensor.hpp"
#include "attest/kernels/kernel.hpp"
#include "attest/metrics/tensor_metrics.hpp"

namespace attest::py {

kernels::Kernel& find_kernel(const std::string& name);
nlohmann::json parse_request(const char* text);
conformance::CaseFile case_file(const nlohmann::json& req, const conformance::Profile& profile);
const conformance::ToleranceTable& tolerances(const nlohmann::json& req, conformance::ToleranceTable& holder);

// attest_py_studies.cpp: merge conformance, the sequence-length ladder, kernel parity.
nlohmann::json op_merge(const nlohmann::json& req, int& rc);
nlohmann::json op_ladder(const nlohmann::json& req, int& rc);
nlohmann::json op_pair(const nlohmann::json& req, int& rc);

}  // namespace attest::py

namespace attest::py {

// Helpers shared by the studies and the device-resident path (attest_py_studies.cpp).
using conformance::engine::concat_rows;  // the engine's (along dimension 1 of [B,s_i,H,D], f32 or f64)
Tensor to_f64(const Tensor& t);
nlohmann::json comparison_json(const metrics::Comparison& c);
using conformance::engine::make_result;
conformance::Case case_from(const nlohmann::json& req, const std::string& kernel_key = "kernel");

// attest_py_device.cpp: bindings of the conformance engine (docs/python.md "Device-resident cases").
// `op` is one of device_info, device_plan, device_generate, device_judge, device_operands, device_log_open,
// device_log_compare, device_log_fingerprint, device_log_close.
bool is_device_op(const std::string& op);
nlohmann::json op_device(const std::string& op, const nlohmann::json& req, int& rc);
// The ladder's slope verdict over per-length rel_l2 of kernel, budget and floor (op_ladder and
// the device ladder, op ladder_verdict).
nlohmann::json ladder_slope(const std::vector<double>& xs, const std::vector<double>& ek, const std::vector<double>& eb,
                            const std::vector<double>& ef, double margin, bool any_fail, std::string& verdict,
                            std::string& reason);
nlohmann::json op_ladder_verdict(const nlohmann::json& req, int& rc);

}  // namespace attest::py
