# issue 9: the synthetic diffusion pipeline (e2e/synth), its writers, the study, `attest e2e
# synth` / `attest e2e study`, attest_synth_runs (the device-host runner) and tests.

# The model and sampler: core, datasets (in-house sin/cos, npy), the kernel registry (no kernels:
# executables link the kernels they want, once). No OpenCV: the device-host runner links this.
attest_library(attest_e2e_synth
  SOURCES src/synth.cpp src/synth_runs.cpp
  DEPS attest_core attest_datasets attest_kernel_registry nlohmann_json::nlohmann_json OpenMP::OpenMP_CXX)

# The device-host runner: every kernel (GPU ones when ATTEST_GPU != none; mutants in test builds).
add_executable(attest_synth_runs tools/attest_synth_runs.cpp)
target_link_libraries(attest_synth_runs PRIVATE attest_e2e_synth attest_kernels CLI11::CLI11)
if(ATTEST_BUILD_TESTS AND TARGET attest_kernels_mutants)
  target_link_libraries(attest_synth_runs PRIVATE attest_kernels_mutants)
endif()
attest_target_defaults(attest_synth_runs)

if(NOT ATTEST_MEDIA)
  return()  # the writers, the study and their commands need OpenCV and libsndfile
endif()

# OpenCV through attest_opencv (metrics/media.cmake); libsndfile located directly (media's
# PkgConfig::SNDFILE is an imported target local to metrics/).
find_library(ATTEST_SYNTH_SNDFILE sndfile REQUIRED)
find_path(ATTEST_SYNTH_SNDFILE_INCLUDE sndfile.h REQUIRED)

attest_library(attest_e2e_synth_io
  SOURCES src/synth_io.cpp
  DEPS attest_e2e_synth attest_datasets attest_opencv attest_e2e_compare ${ATTEST_SYNTH_SNDFILE})
target_include_directories(attest_e2e_synth_io SYSTEM PUBLIC ${ATTEST_SYNTH_SNDFILE_INCLUDE})

# The study: synthetic runs compared by attest_e2e_compare (e2e/compare, issue 6).
attest_library(attest_e2e_study
  SOURCES src/study.cpp
  DEPS attest_e2e_synth_io attest_e2e_compare attest_report nlohmann_json::nlohmann_json)

attest_test(e2e_synth_tests
  SOURCES tests/test_synth.cpp
  DEPS attest_e2e_study attest_kernels attest_kernels_mutants OpenMP::OpenMP_CXX
  LABELS e2e unit
  RUNS_CLI)
