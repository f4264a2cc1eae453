// The `attest` command line: one program; each subcommand registers itself (commands.hpp).
#include <algorithm>
#include <cstdio>
#include <exception>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

#include "attest/core/status.hpp"
#include "commands.hpp"

namespace attest::cli {
namespace {
int g_exit = 0;
std::vector<std::pair<int, AddCommand>>& registered() {
  static std::vector<std::pair<int, AddCommand>> v;
  return v;
}
}  // namespace
void set_exit(int code) { g_exit = code; }
CommandRegistrar::CommandRegistrar(int order, AddCommand add) { registered().emplace_back(order, add); }

CLI::App* e2e_app(CLI::App& app) {
  for (CLI::App* sub : app.get_subcommands([](CLI::App* s) { return s->get_name() == "e2e"; })) return sub;
  CLI::App* e2e = app.add_subcommand("e2e", "End-to-end video and audio: comparison against the floor pair, synthetic pipeline");
  e2e->require_subcommand(1);
  return e2e;
}
}  // namespace attest::cli

int main(int argc, char** argv) {
  CLI::App app{"attest: numerical validation and conformance of low-precision attention kernels.\n"
               "Exit codes: 0 pass, 1 a check failed, 2 usage or input error."};
  app.require_subcommand(1);
  app.set_version_flag("--version", "attest 0.1.0");
  auto commands = attest::cli::registered();
  std::stable_sort(commands.begin(), commands.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (const auto& [order, add] : commands) add(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "attest: error: %s\n", e.what());
    return 2;
  } catch (const attest::Error& e) {
    std::fprintf(stderr, "attest: error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "attest: internal error: %s\n", e.what());
    return 3;
  }
  return attest::cli::g_exit;
}
