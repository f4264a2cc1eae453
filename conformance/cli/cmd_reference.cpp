// Placeholder replaced by the reference-attention work (issue 2, item 7).
#include "commands.hpp"

namespace attest::cli {
void add_reference_command(CLI::App& app) {
  app.add_subcommand("reference", "FP64/FP32/multiprecision reference attention (not built yet)");
}
}  // namespace attest::cli
