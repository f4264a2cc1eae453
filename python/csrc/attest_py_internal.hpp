#pragma once
// Shared between the two translation units of libattest_py (not a public header).
#include <string>

#include <nlohmann/json.hpp>

#include "attest/conformance/suite.hpp"
#include "attest/conformance/tolerance.hpp"
#include "attest/kernels/kernel.hpp"

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
