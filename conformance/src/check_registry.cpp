// The check registry: one line per built-in check (each lives in checks/check_<name>.cpp); checks
// defined elsewhere (a test, a downstream tool) add themselves with ATTEST_REGISTER_CHECK.
#include <fnmatch.h>

#include <memory>

#include "attest/conformance/check.hpp"
#include "attest/core/status.hpp"

namespace attest::conformance {
namespace checks {
std::unique_ptr<Check> make_bitwise();
std::unique_ptr<Check> make_accuracy();
std::unique_ptr<Check> make_determinism();
std::unique_ptr<Check> make_call_path();
std::unique_ptr<Check> make_layout();
std::unique_ptr<Check> make_poison();
std::unique_ptr<Check> make_canary();
std::unique_ptr<Check> make_churn();
std::unique_ptr<Check> make_split_kv();
std::unique_ptr<Check> make_masked_rows();
std::unique_ptr<Check> make_nonfinite();
std::unique_ptr<Check> make_subnormal();
std::unique_ptr<Check> make_refusal();
// Device checks (check_graph.cpp, check_device_memory.cpp; unsupported in CPU builds).
std::unique_ptr<Check> make_graph_replay();
std::unique_ptr<Check> make_graph_inputs();
std::unique_ptr<Check> make_graph_update();
std::unique_ptr<Check> make_graph_stream();
std::unique_ptr<Check> make_device_poison();
std::unique_ptr<Check> make_device_canary();
std::unique_ptr<Check> make_device_churn();
}  // namespace checks

namespace {
// Built-in checks first, in this fixed order (reports and case expansion follow it), then the
// checks registered from elsewhere (register_check) in registration order.
struct Registry {
  std::vector<std::unique_ptr<Check>> owned;
  std::vector<const Check*> view;
  Registry() {
    using namespace checks;
    for (auto make : {make_bitwise, make_accuracy, make_determinism, make_call_path, make_layout, make_poison,
                      make_canary, make_churn, make_split_kv, make_masked_rows, make_nonfinite, make_subnormal,
                      make_refusal, make_graph_replay, make_graph_inputs, make_graph_update, make_graph_stream,
                      make_device_poison, make_device_canary, make_device_churn})
      add(make());
  }
  void add(std::unique_ptr<Check> c) {
    for (const Check* have : view)
      if (have->name() == c->name()) throw Error("check '" + std::string(c->name()) + "' is registered twice");
    owned.push_back(std::move(c));
    view.push_back(owned.back().get());
  }
};
Registry& registry() {
  static Registry r;
  return r;
}
}  // namespace

void register_check(std::unique_ptr<Check> check) { registry().add(std::move(check)); }
CheckRegistrar::CheckRegistrar(std::unique_ptr<Check> (*make)()) { register_check(make()); }

std::span<const Check* const> all_checks() { return registry().view; }

const Check* find_check(std::string_view name) {
  for (const Check* c : all_checks())
    if (c->name() == name) return c;
  return nullptr;
}

std::vector<const Check*> match_checks(std::string_view globs) {
  std::vector<const Check*> out;
  std::string valid;
  for (const Check* c : all_checks()) valid += (valid.empty() ? "" : " ") + std::string(c->name());
  std::size_t pos = 0;
  while (pos <= globs.size()) {
    const auto comma = globs.find(',', pos);
    const std::string g(globs.substr(pos, comma == std::string_view::npos ? std::string_view::npos : comma - pos));
    bool any = false;
    for (const Check* c : all_checks())
      if (::fnmatch(g.c_str(), std::string(c->name()).c_str(), 0) == 0) {
        any = true;
        if (std::find(out.begin(), out.end(), c) == out.end()) out.push_back(c);
      }
    if (!any) throw Error("check '" + g + "' matches no check (valid: " + valid + ")");
    if (comma == std::string_view::npos) break;
    pos = comma + 1;
  }
  // Registry order, whatever the order of the globs.
  std::vector<const Check*> ordered;
  for (const Check* c : all_checks())
    if (std::find(out.begin(), out.end(), c) != out.end()) ordered.push_back(c);
  return ordered;
}

}  // namespace attest::conformance
