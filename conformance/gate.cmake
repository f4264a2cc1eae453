# The conformance engine (attest_conformance) and its tests (the gate/run/list/qualify commands:
# cli/). Included from conformance/CMakeLists.txt.

# --- data compiled into the binary: tolerances, profiles, case files ---
file(GLOB _gate_profiles CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/profiles/*.json)
file(GLOB _gate_cases CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/datasets/cases/*.cases)
set(_gate_entries "tolerances.json=${CMAKE_CURRENT_SOURCE_DIR}/tolerances.json")
foreach(f IN LISTS _gate_profiles)
  get_filename_component(n ${f} NAME)
  list(APPEND _gate_entries "profiles/${n}=${f}")
endforeach()
foreach(f IN LISTS _gate_cases)
  get_filename_component(n ${f} NAME)
  list(APPEND _gate_entries "cases/${n}=${f}")
endforeach()
# The suite commit and dirty flag, stamped at every build (conformance/stamp.cmake).
set(_gate_stamp ${CMAKE_CURRENT_BINARY_DIR}/gate_build_stamp.cpp)
add_custom_target(attest_build_stamp ALL
  COMMAND ${CMAKE_COMMAND} "-DSRC=${PROJECT_SOURCE_DIR}" "-DOUT=${_gate_stamp}" -P ${CMAKE_CURRENT_SOURCE_DIR}/stamp.cmake
  BYPRODUCTS ${_gate_stamp}
  COMMENT "Stamping the suite commit"
  VERBATIM)
set(_gate_embedded ${CMAKE_CURRENT_BINARY_DIR}/gate_embedded_data.cpp)
add_custom_command(OUTPUT ${_gate_embedded}
  COMMAND ${CMAKE_COMMAND} "-DOUT=${_gate_embedded}" "-DENTRIES=${_gate_entries}"
          -P ${CMAKE_CURRENT_SOURCE_DIR}/embed.cmake
  DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/embed.cmake ${CMAKE_CURRENT_SOURCE_DIR}/tolerances.json ${_gate_profiles} ${_gate_cases}
  COMMENT "Embedding gate tolerances, profiles and case files"
  VERBATIM)

file(GLOB _gate_checks CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/src/checks/check_*.cpp)
attest_library(attest_conformance
  SOURCES src/case.cpp src/verdict.cpp src/tolerance.cpp src/context.cpp src/suite.cpp src/gate.cpp src/engine.cpp src/operands.cpp
          src/check_registry.cpp ${_gate_checks} ${_gate_embedded} ${_gate_stamp}
  DEPS attest_core attest_report attest_metrics attest_reference attest_datasets attest_kernel_registry
       nlohmann_json::nlohmann_json fmt::fmt OpenMP::OpenMP_CXX)
target_include_directories(attest_conformance PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/src)
add_dependencies(attest_conformance attest_build_stamp)
if(NOT ATTEST_GPU STREQUAL "none")
  target_compile_definitions(attest_conformance PRIVATE ATTEST_GPU_BACKEND="${ATTEST_GPU}")
  # Device checks (graph capture/replay, device poison/canary/churn) use the GPU host API (gpuq).
  target_link_libraries(attest_conformance PUBLIC attest_gpu)
endif()

# --- tests ---
if(ATTEST_BUILD_TESTS)
  # The abstract suite: TEST_P in an OBJECT library (kept whole by the linker), instantiated per
  # kernel registry x case file by each test program.
  add_library(attest_conformance_gtest OBJECT tests/conformance_suite.cpp)
  target_include_directories(attest_conformance_gtest PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}/tests)
  target_link_libraries(attest_conformance_gtest PUBLIC attest_conformance GTest::gtest)
  attest_target_defaults(attest_conformance_gtest)

  attest_test(conformance_tests
    SOURCES tests/test_case.cpp tests/test_tolerance.cpp tests/test_suite_files.cpp tests/test_reports.cpp
            tests/test_checks_fake.cpp tests/test_containment.cpp tests/test_engine.cpp tests/test_operands.cpp
    DEPS attest_conformance attest_reference Boost::boost
    LABELS unit)
  if(TARGET conformance_tests)
    target_compile_definitions(conformance_tests PRIVATE
      ATTEST_GATE_GOLDEN="${CMAKE_CURRENT_SOURCE_DIR}/tests/golden")
  endif()

  # Adding a check is one file: a check registered by the test binary alone (ATTEST_REGISTER_CHECK).
  attest_test(conformance_check_extension
    SOURCES tests/test_check_extension.cpp
    DEPS attest_conformance attest_reference
    LABELS unit)

  # Every registered cpu.* kernel x the smoke case set, through the abstract suite: one test
  # process per group (~190, ~25 s). Labelled slow so the ASan pass skips it: scripts/run runs
  # the same cases through `attest gate`, and conformance_mutation runs the engine under ASan.
  attest_test(conformance_smoke
    SOURCES tests/instantiate_smoke.cpp
    DEPS attest_conformance_gtest attest_kernels
    LABELS slow)

  if(TARGET attest_kernels_mutants)
    # Mutation score; false alarms over 50 seeds (slow); the CLI (exit codes, repro lines).
    attest_test(conformance_mutation
      SOURCES tests/test_mutation.cpp
      DEPS attest_conformance attest_kernels attest_kernels_mutants
      LABELS unit)
    attest_test(conformance_seeds
      SOURCES tests/test_mutation.cpp
      DEPS attest_conformance attest_kernels
      LABELS slow)
    if(TARGET conformance_seeds)
      target_compile_definitions(conformance_seeds PRIVATE ATTEST_SEED_SWEEP)
    endif()
    # The accuracy rule on correct non-bitwise kernels (50 seeds x every fill) and on p_e5m2.
    attest_test(conformance_accuracy_rule
      SOURCES tests/test_accuracy_rule.cpp
      DEPS attest_conformance attest_kernels attest_kernels_mutants attest_reference
      LABELS slow)
    attest_test(conformance_cli
      SOURCES tests/test_cli.cpp
      DEPS attest_conformance
      LABELS unit
      RUNS_CLI)
  endif()
endif()
