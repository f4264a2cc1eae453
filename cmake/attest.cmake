# Shared build helpers for attest targets.

# Warnings for every attest target; -Werror in CI (ATTEST_WERROR=ON in the presets).
function(attest_target_defaults target)
  # -Wno-restrict: GCC 12 reports false positives inside libstdc++'s std::string operator+
  # (GCC bug 105329); the warning is useless until GCC 13.
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow -Wno-unused-parameter
    $<$<CXX_COMPILER_ID:GNU>:-Wno-restrict>)
  # Bit-exact emulation needs every rounding to be explicit: no silent a*b+c -> fma contraction.
  # Code that wants a fused multiply-add calls std::fma.
  target_compile_options(${target} PRIVATE -ffp-contract=off)
  if(ATTEST_NATIVE)
    target_compile_options(${target} PRIVATE -march=native)
  endif()
  if(ATTEST_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()

# attest_library(NAME SOURCES ... DEPS ...): a static library with its public headers in
# <folder>/include.
function(attest_library name)
  cmake_parse_arguments(A "" "" "SOURCES;DEPS" ${ARGN})
  add_library(${name} STATIC ${A_SOURCES})
  target_include_directories(${name} PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}/include)
  target_link_libraries(${name} PUBLIC ${A_DEPS})
  attest_target_defaults(${name})
endfunction()

# attest_test(NAME SOURCES ... DEPS ... LABELS ... [DEFINES ...] [RUNS_CLI]): a GoogleTest program
# whose tests are discovered at test time (PRE_TEST), so a host without a GPU still builds
# everything. RUNS_CLI: the tests run the `attest` CLI (core/testing run_cli.hpp), which is built
# first and whose path they get as ATTEST_CLI.
function(attest_test name)
  if(NOT ATTEST_BUILD_TESTS)
    return()
  endif()
  cmake_parse_arguments(A "RUNS_CLI" "TIMEOUT" "SOURCES;DEPS;LABELS;DEFINES" ${ARGN})
  if("slow" IN_LIST A_LABELS AND NOT ATTEST_BUILD_SLOW_TESTS)
    return()  # the asan preset runs no slow test, so it does not build them either
  endif()
  if(NOT A_TIMEOUT)
    set(A_TIMEOUT 600)
  endif()
  add_executable(${name} ${A_SOURCES})
  target_link_libraries(${name} PRIVATE ${A_DEPS} GTest::gtest GTest::gtest_main)
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR}/core/testing)  # attest/testing/*.hpp
  attest_target_defaults(${name})
  if(A_DEFINES)
    target_compile_definitions(${name} PRIVATE ${A_DEFINES})
  endif()
  if(A_RUNS_CLI)
    add_dependencies(${name} attest)
    target_compile_definitions(${name} PRIVATE ATTEST_CLI="$<TARGET_FILE:attest>")
  endif()
  gtest_discover_tests(${name}
    DISCOVERY_MODE PRE_TEST
    PROPERTIES LABELS "${A_LABELS}" TIMEOUT ${A_TIMEOUT})
endfunction()

# attest_benchmark(NAME SOURCES ... DEPS ...): a Google Benchmark program (not a test).
function(attest_benchmark name)
  if(NOT ATTEST_BUILD_BENCHMARKS)
    return()
  endif()
  cmake_parse_arguments(A "" "" "SOURCES;DEPS" ${ARGN})
  add_executable(${name} ${A_SOURCES})
  target_link_libraries(${name} PRIVATE ${A_DEPS} benchmark::benchmark)
  attest_target_defaults(${name})
endfunction()
