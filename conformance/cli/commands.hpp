#pragma once
/// Subcommands of the `attest` CLI. Each lives in its own cmd_*.cpp and adds itself to the app;
/// its callback returns the process exit code (0 pass, 1 fail, 2 usage or input error) through
/// `set_exit`. Input errors are thrown as attest::Error and turned into one line + exit 2 by main.
#include <CLI/CLI.hpp>

namespace attest::cli {

/// Records the exit code a subcommand wants main() to return.
void set_exit(int code);

void add_reference_command(CLI::App& app);  // issue 2: FP64/FP32/multiprecision reference
void add_generate_command(CLI::App& app);   // issue 2: deterministic q/k/v inputs as .npy
void add_codec_command(CLI::App& app);      // issue 3: element format encode / decode (.npy)
void add_quantize_commands(CLI::App& app);  // issue 3: quantize / dequantize with reference quantizers
void add_gate_command(CLI::App& app);  // issue 4: gate + qualify; add_run_command: rerun one case; add_list_command
void add_run_command(CLI::App& app);
void add_list_command(CLI::App& app);
void add_check_command(CLI::App& app);  // issue 7: check --capture FILE|DIR
void add_bench_command(CLI::App& app);   // issue 8: bench; add_report_command: report diff/merge/html
void add_report_command(CLI::App& app);
void add_e2e_synth_commands(CLI::App& app);  // issue 9: e2e synth + e2e study (creates `e2e` if absent)
/// The `e2e` parent subcommand: the existing one, or a new one added to `app` (issue 6 / 9 children).
CLI::App* e2e_app(CLI::App& app);
void add_e2e_compare_command(CLI::App& app);  // issue 6: e2e compare; add_metrics_commands: metrics image/audio
void add_metrics_commands(CLI::App& app);

}  // namespace attest::cli
