#pragma once
/// Subcommands of the `attest` CLI. A command is one cmd_*.cpp that registers its adder with
/// ATTEST_REGISTER_COMMAND plus one line in cli/CMakeLists.txt; main() adds every registered
/// command to the app. A callback returns the process exit code (0 pass, 1 fail, 2 usage or input
/// error) through `set_exit`; input errors are thrown as attest::Error and turned into one line +
/// exit 2 by main.
#include <CLI/CLI.hpp>

namespace attest::cli {

/// Records the exit code a subcommand wants main() to return.
void set_exit(int code);

/// Adds one command (or a family, e.g. quantize + dequantize) to the app.
using AddCommand = void (*)(CLI::App& app);

/// Registers `add`; main() calls the adders in ascending `order`, which is the order `attest
/// --help` lists them in (registration order across files is unspecified, so it is explicit).
struct CommandRegistrar {
  CommandRegistrar(int order, AddCommand add);
};

/// The `e2e` parent subcommand: the existing one, or a new one added to `app` (its children,
/// `e2e synth`, `e2e study` and `e2e compare`, live in different files and join it).
CLI::App* e2e_app(CLI::App& app);

}  // namespace attest::cli

#define ATTEST_CLI_CAT2(a, b) a##b
#define ATTEST_CLI_CAT(a, b) ATTEST_CLI_CAT2(a, b)
/// ATTEST_REGISTER_COMMAND(40, add_gate_command); in a cmd_*.cpp compiled into the `attest`
/// executable itself (not a static library, where the linker could drop the registrar).
#define ATTEST_REGISTER_COMMAND(order, add) \
  static const ::attest::cli::CommandRegistrar ATTEST_CLI_CAT(attest_cli_command_, __LINE__){order, add}
