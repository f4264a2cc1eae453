#include "attest/conformance/verdict.hpp"

#include <array>
#include <cmath>

#include "attest/core/status.hpp"

namespace attest::conformance {
namespace {
constexpr std::array<std::string_view, 8> kNames{"passed", "failed", "error", "unsupported", "invalid", "mistrusted",
                                                  "fault", "accepted"};
}

std::string_view verdict_name(Verdict v) { return kNames[static_cast<std::size_t>(v)]; }

Verdict parse_verdict(std::string_view s) {
  for (std::size_t i = 0; i < kNames.size(); ++i)
    if (kNames[i] == s) return static_cast<Verdict>(i);
  throw Error("verdict '" + std::string(s) + "' unknown (valid: passed, failed, error, unsupported, invalid, mistrusted, fault, accepted)");
}

nlohmann::json json_number(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return v;
}

nlohmann::json to_json(const Result& r) {
  nlohmann::json j;
  j["case"] = r.descriptor;
  j["kernel"] = r.kernel;
  j["recipe"] = r.recipe;
  j["problem"] = r.problem;
  j["dist"] = r.dist;
  j["seed"] = r.seed;
  j["check"] = r.check;
  j["verdict"] = verdict_name(r.outcome.verdict);
  j["reason"] = r.outcome.reason;
  j["seconds"] = r.seconds;
  j["figures"] = r.outcome.figures.is_null() ? nlohmann::json::object() : r.outcome.figures;
  return j;
}

Result result_from_json(const nlohmann::json& j) {
  try {
    Result r;
    r.descriptor = j.at("case").get<std::string>();
    r.kernel = j.at("kernel").get<std::string>();
    r.recipe = j.at("recipe").get<std::string>();
    r.problem = j.at("problem").get<std::string>();
    r.dist = j.at("dist").get<std::string>();
    r.seed = j.at("seed").get<std::uint64_t>();
    r.check = j.at("check").get<std::string>();
    r.outcome.verdict = parse_verdict(j.at("verdict").get<std::string>());
    r.outcome.reason = j.at("reason").get<std::string>();
    r.outcome.figures = j.value("figures", nlohmann::json::object());
    r.seconds = j.value("seconds", 0.0);
    return r;
  } catch (const nlohmann::json::exception& e) {
    throw Error(std::string("result record: ") + e.what());
  }
}

}  // namespace attest::conformance
