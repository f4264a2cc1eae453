# attest_media: PSNR/SSIM/statistics on images and frames, audio metrics. Included from
# metrics/CMakeLists.txt.

# OpenCV: Debian's narrow -dev packages (libopencv-{core,imgproc,imgcodecs,videoio}-dev) ship the
# headers and libraries but not OpenCVConfig.cmake (that comes with libopencv-dev and ~85 more
# packages), so fall back to locating the four modules directly.
find_package(OpenCV QUIET COMPONENTS core imgproc imgcodecs videoio)
if(OpenCV_FOUND)
  add_library(attest_opencv INTERFACE)
  target_include_directories(attest_opencv SYSTEM INTERFACE ${OpenCV_INCLUDE_DIRS})
  target_link_libraries(attest_opencv INTERFACE ${OpenCV_LIBS})
else()
  find_path(ATTEST_OPENCV_INCLUDE_DIR opencv2/core.hpp PATH_SUFFIXES opencv4 REQUIRED)
  add_library(attest_opencv INTERFACE)
  target_include_directories(attest_opencv SYSTEM INTERFACE ${ATTEST_OPENCV_INCLUDE_DIR})
  foreach(m videoio imgcodecs imgproc core)
    find_library(ATTEST_OPENCV_${m} opencv_${m} REQUIRED)
    target_link_libraries(attest_opencv INTERFACE ${ATTEST_OPENCV_${m}})
  endforeach()
endif()
find_package(PkgConfig REQUIRED)
# GLOBAL: attest_media links it publicly and is used from other folders (e2e).
pkg_check_modules(SNDFILE REQUIRED IMPORTED_TARGET GLOBAL sndfile)

attest_library(attest_media
  SOURCES src/media.cpp src/media_audio.cpp
  DEPS attest_core attest_opencv PkgConfig::SNDFILE OpenMP::OpenMP_CXX)

attest_test(metrics_media_tests
  SOURCES tests/test_media.cpp tests/test_media_audio.cpp
  DEPS attest_media nlohmann_json::nlohmann_json
  LABELS unit)
if(TARGET metrics_media_tests)
  target_compile_definitions(metrics_media_tests PRIVATE
    ATTEST_MEDIA_TEST_DATA="${CMAKE_CURRENT_SOURCE_DIR}/tests/data")
endif()
