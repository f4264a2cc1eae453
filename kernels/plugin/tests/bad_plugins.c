/* Deliberately broken plugins for the loader's error paths, one per value of BAD_PLUGIN:
 *   no_symbol       exports no attest_plugin_query
 *   wrong_version   abi_version = ATTEST_PLUGIN_ABI_VERSION + 1
 *   small_info      attest_plugin_info.struct_size smaller than version 1's
 *   small_kernel    attest_plugin_kernel.struct_size smaller than version 1's
 *   refuses         attest_plugin_query returns NULL
 *   bad_recipe      a kernel lists a recipe attest cannot parse
 *   dup_kernel      two kernels with one name
 *   failing         a valid kernel whose run reports failure (code 2, a two-line message)
 *   refuse_all      a valid kernel whose supports() refuses every problem it declares
 *   call_refuses    a valid kernel whose run returns ATTEST_PLUGIN_RUN_REFUSED on every call
 *   faults          a valid kernel whose run returns ATTEST_PLUGIN_RUN_FAULT on every call
 *   old_size        struct_size of the kernel before declares/row_align were appended (whose
 *                   static struct still holds declarations the loader must not read)
 *   declares        declares ftz and no causal cross attention, row_align 8
 */
#include <stdio.h>
#include <string.h>

#include "attest/plugin.h"

#define BAD_no_symbol 1
#define BAD_wrong_version 2
#define BAD_small_info 3
#define BAD_small_kernel 4
#define BAD_refuses 5
#define BAD_bad_recipe 6
#define BAD_dup_kernel 7
#define BAD_failing 8
#define BAD_refuse_all 9
#define BAD_call_refuses 10
#define BAD_faults 11
#define BAD_old_size 12
#define BAD_declares 13
#define BAD_CAT2(a, b) a##b
#define BAD_CAT(a, b) BAD_CAT2(a, b)
#define BAD BAD_CAT(BAD_, BAD_PLUGIN)
#define BAD_STR1(x) #x
#define BAD_STR(x) BAD_STR1(x)

static int run(void* context, const attest_plugin_run_args* args, char* message, size_t size) {
  (void)context;
  (void)args;
#if BAD == BAD_call_refuses
  snprintf(message, size, "No available kernel. Aborting execution.");
  return ATTEST_PLUGIN_RUN_REFUSED;
#elif BAD == BAD_faults
  snprintf(message, size, "CUDA error: misaligned address");
  return ATTEST_PLUGIN_RUN_FAULT;
#else
  snprintf(message, size, "device ran out of bananas\nsecond line that attest drops");
  return 2;
#endif
}

#if BAD == BAD_call_refuses || BAD == BAD_faults
#define SUPPORTS NULL
#define MASKS 7u
#define LAYOUTS 15u
#define FLAGS (ATTEST_PLUGIN_CAP_GQA | ATTEST_PLUGIN_CAP_CROSS | ATTEST_PLUGIN_CAP_RAGGED | ATTEST_PLUGIN_CAP_HEAD_DIM_V | \
               ATTEST_PLUGIN_CAP_LSE | ATTEST_PLUGIN_CAP_DETERMINISTIC)
#elif BAD == BAD_refuse_all
static int refuse(void* context, const attest_plugin_problem* problem, const char* recipe, char* reason, size_t size) {
  (void)context;
  (void)problem;
  (void)recipe;
  snprintf(reason, size, "not today");
  return 0;
}
#define SUPPORTS refuse
/* Declares every mask, layout and shape feature, so every case lies inside its declarations. */
#define MASKS 7u
#define LAYOUTS 15u
#define FLAGS (ATTEST_PLUGIN_CAP_GQA | ATTEST_PLUGIN_CAP_CROSS | ATTEST_PLUGIN_CAP_RAGGED | ATTEST_PLUGIN_CAP_HEAD_DIM_V | \
               ATTEST_PLUGIN_CAP_LSE | ATTEST_PLUGIN_CAP_DETERMINISTIC)
#else
#define SUPPORTS NULL
#define MASKS 1u
#define LAYOUTS 1u
#define FLAGS (ATTEST_PLUGIN_CAP_LSE | ATTEST_PLUGIN_CAP_DETERMINISTIC)
#endif

#if BAD == BAD_bad_recipe
static const char* const kRecipes[] = {"f32", "p=fp7"};
#define N_RECIPES 2
#else
static const char* const kRecipes[] = {"f32"};
#define N_RECIPES 1
#endif

#if BAD == BAD_small_kernel
#define KERNEL_SIZE 16
#elif BAD == BAD_old_size
#define KERNEL_SIZE ATTEST_PLUGIN_KERNEL_V1_MIN_SIZE
#else
#define KERNEL_SIZE sizeof(attest_plugin_kernel)
#endif
#if BAD == BAD_declares || BAD == BAD_old_size
#define DECLARES (ATTEST_PLUGIN_DECLARE_FTZ | ATTEST_PLUGIN_DECLARE_NO_CAUSAL_CROSS)
#define ROW_ALIGN 8u
#else
#define DECLARES 0u
#define ROW_ALIGN 0u
#endif

static const attest_plugin_kernel kKernel = {KERNEL_SIZE, ATTEST_PLUGIN_MEMORY_HOST, "k", "cpu", kRecipes, N_RECIPES, 0, NULL,
                                             NULL, 0, MASKS, LAYOUTS, 0, FLAGS,
                                             0, SUPPORTS, run, NULL, DECLARES, ROW_ALIGN, NULL};
#if BAD == BAD_dup_kernel
static const attest_plugin_kernel* const kKernels[] = {&kKernel, &kKernel};
#else
static const attest_plugin_kernel* const kKernels[] = {&kKernel};
#endif

static const attest_plugin_info kInfo = {
#if BAD == BAD_small_info
    8,
#else
    sizeof(attest_plugin_info),
#endif
#if BAD == BAD_wrong_version
    ATTEST_PLUGIN_ABI_VERSION + 1,
#else
    ATTEST_PLUGIN_ABI_VERSION,
#endif
    "bad_" BAD_STR(BAD_PLUGIN), "0", kKernels, sizeof kKernels / sizeof kKernels[0], 0};

#if BAD != BAD_no_symbol
ATTEST_PLUGIN_EXPORT const attest_plugin_info* attest_plugin_query(uint32_t host_abi_version) {
  (void)host_abi_version;
  /* refuses: NULL (kInfo is still referenced, so every variant compiles the same tables) */
  return BAD == BAD_refuses ? NULL : &kInfo;
}
#else
/* Exported, but under another name: the loader must not find attest_plugin_query. */
ATTEST_PLUGIN_EXPORT const attest_plugin_info* attest_plugin_query_v0(void) { return &kInfo; }
#endif
