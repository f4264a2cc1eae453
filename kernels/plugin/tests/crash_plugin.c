/* Test plugins for `attest gate --isolate` (fault containment, docs/gate.md): the example
 * plugin's correct online_f32 kernel (examples/example_plugin.c, included), except on problems
 * with seqlen_kv == 150 (one case group of the smoke set), where it takes its process down. One
 * build per value of CRASH, each the plugin "crash_<CRASH>" with the one kernel "online_f32":
 *   abort  abort(): SIGABRT, as a failed assertion or a CUDA runtime's fatal error
 *   hang   waits forever (pause()): only --case-timeout ends it */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <unistd.h>

/* The example's own export is renamed; this file exports the crash plugin's query. */
#define attest_plugin_query attest_crash_plugin_example_query
#include "../examples/example_plugin.c"
#undef attest_plugin_query

#define CRASH_abort 1
#define CRASH_hang 2
#define CRASH_CAT2(a, b) a##b
#define CRASH_CAT(a, b) CRASH_CAT2(a, b)
#define CRASH_MODE CRASH_CAT(CRASH_, CRASH)
#define CRASH_STR1(x) #x
#define CRASH_STR(x) CRASH_STR1(x)

static int crash_run(void* context, const attest_plugin_run_args* a, char* msg, size_t size) {
  if (a->problem->seqlen_kv == 150) {
#if CRASH_MODE == CRASH_abort
    abort();
#elif CRASH_MODE == CRASH_hang
    for (;;) pause();
#else
#error "CRASH must be abort or hang"
#endif
  }
  return run(context, a, msg, size);
}

static example_kernel k_crash = {0, 0};
static const attest_plugin_kernel kCrash = {.struct_size = sizeof(attest_plugin_kernel),
                                            .memory = ATTEST_PLUGIN_MEMORY_HOST,
                                            .name = "online_f32",
                                            .backend = "cpu",
                                            .recipes = kRecipes,
                                            .n_recipes = 1,
                                            .masks = EXAMPLE_MASKS,
                                            .layouts = EXAMPLE_LAYOUTS,
                                            .flags = EXAMPLE_FLAGS,
                                            .supports = supports,
                                            .run = crash_run,
                                            .context = &k_crash};
static const attest_plugin_kernel* const kCrashKernels[] = {&kCrash};
static const attest_plugin_info kCrashInfo = {sizeof(attest_plugin_info), ATTEST_PLUGIN_ABI_VERSION,
                                              "crash_" CRASH_STR(CRASH), "1.0", kCrashKernels, 1, 0};

ATTEST_PLUGIN_EXPORT const attest_plugin_info* attest_plugin_query(uint32_t host_abi_version) {
  return host_abi_version == ATTEST_PLUGIN_ABI_VERSION ? &kCrashInfo : NULL;
}
