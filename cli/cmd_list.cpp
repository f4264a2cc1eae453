// `attest list kernels|recipes|checks|profiles|cases`: what the gate can run.
#include <cstdio>
#include <memory>

#include <fmt/format.h>

#include "attest/conformance/gate.hpp"
#include "attest/core/recipe.hpp"
#include "attest/core/status.hpp"
#include "attest/kernels/kernel.hpp"
#include "commands.hpp"

namespace attest::cli {
namespace {

std::string join(const std::vector<std::string>& v, const char* sep = ", ") {
  std::string s;
  for (const auto& e : v) s += (s.empty() ? "" : sep) + e;
  return s;
}

}  // namespace

static void add_list_command(CLI::App& app) {
  struct Args {
    std::string what, set, profile = "cpu", kernel;
  };
  auto a = std::make_shared<Args>();
  auto* c = app.add_subcommand("list", "List kernels, recipes, checks, profiles or case sets");
  c->add_option("what", a->what, "kernels | recipes | checks | profiles | cases")
      ->required()
      ->check(CLI::IsMember({"kernels", "recipes", "checks", "profiles", "cases"}));
  c->add_option("set", a->set, "For `cases`: a case set or file to expand into descriptors");
  c->add_option("--profile", a->profile, "For `cases SET`: the profile to expand against");
  c->add_option("--kernel", a->kernel, "For `cases SET`: kernel glob");
  c->callback([a] {
    namespace cf = conformance;
    if (a->what == "kernels") {
      for (const auto& k : kernels::Registry::instance().all()) {
        const auto caps = k->capabilities();
        std::vector<std::string> flags;
        if (caps.bitwise) flags.emplace_back("bitwise");
        if (caps.deterministic) flags.emplace_back("deterministic");
        if (caps.graph_capturable) flags.emplace_back("graph");
        if (caps.lse) flags.emplace_back("lse");
        std::printf("%-36s %-7s recipes: %s  [%s]\n", k->name().c_str(), k->backend().c_str(), join(k->recipes()).c_str(),
                    join(flags, " ").c_str());
      }
    } else if (a->what == "recipes") {
      for (const auto& r : named_recipes())
        std::printf("%-28s %s\n    %s\n", std::string(r.name).c_str(), std::string(r.summary).c_str(),
                    std::string(r.definition).c_str());
    } else if (a->what == "checks") {
      for (const auto* ch : cf::all_checks())
        std::printf("%-12s %s\n", std::string(ch->name()).c_str(), std::string(ch->summary()).c_str());
    } else if (a->what == "profiles") {
      for (const auto& n : cf::Profile::builtin_names()) {
        const auto p = cf::Profile::load(n);
        std::printf("%-8s fp8 %-4s mx %-8s cases %-6s %s\n", n.c_str(), p.fp8.c_str(), p.mx.c_str(), p.cases.c_str(),
                    p.description.c_str());
      }
    } else if (a->set.empty()) {
      for (const auto& n : cf::CaseFile::builtin_names()) {
        const auto f = cf::CaseFile::load(n);
        const auto ex = cf::expand(f, cf::Profile::load("cpu"), {});
        std::printf("%-8s %3zu templates, %5zu cases for profile cpu\n", n.c_str(), f.templates.size(), ex.cases.size());
      }
    } else {
      const auto ex = cf::expand(cf::CaseFile::load(a->set), cf::Profile::load(a->profile), {a->kernel, "", ""});
      for (const auto& e : ex.errors) std::fprintf(stderr, "setup error: %s\n", e.c_str());
      for (const auto& cs : ex.cases) std::printf("%s\n", cf::to_string(cs).c_str());
    }
  });
}

ATTEST_REGISTER_COMMAND(60, add_list_command);

}  // namespace attest::cli
