# Third-party dependencies. The engine uses only header-only ones (nlohmann/json), which can be
# carried to a bare CUDA machine; everything compiled (gRPC, yaml-cpp, prometheus-cpp, Boost,
# OpenSSL) belongs to the agent, the controller and the tools. Debian 12 packages:
# scripts/install-deps.sh.

find_package(Threads REQUIRED)

# nlohmann/json: the Debian package, or a carried include dir (TANDEM_JSON_INCLUDE_DIR).
find_package(nlohmann_json 3.10 QUIET CONFIG)
if(NOT nlohmann_json_FOUND)
  set(TANDEM_JSON_INCLUDE_DIR "${PROJECT_SOURCE_DIR}/third_party/nlohmann_json/include"
      CACHE PATH "Directory holding nlohmann/json.hpp, when the package is absent")
  if(NOT EXISTS "${TANDEM_JSON_INCLUDE_DIR}/nlohmann/json.hpp")
    message(FATAL_ERROR "nlohmann/json not found: install nlohmann-json3-dev "
                        "(scripts/install-deps.sh) or set TANDEM_JSON_INCLUDE_DIR")
  endif()
  add_library(nlohmann_json::nlohmann_json INTERFACE IMPORTED)
  target_include_directories(nlohmann_json::nlohmann_json SYSTEM INTERFACE "${TANDEM_JSON_INCLUDE_DIR}")
endif()

if(TANDEM_BUILD_TESTS)
  # GoogleTest: the Debian package, else built from source (Debian's /usr/src/googletest, or a
  # carried copy in TANDEM_GTEST_SOURCE_DIR on a GPU machine).
  find_package(GTest QUIET)
  if(NOT GTest_FOUND)
    set(TANDEM_GTEST_SOURCE_DIR "${PROJECT_SOURCE_DIR}/third_party/googletest"
        CACHE PATH "GoogleTest source tree, when the package is absent")
    if(NOT EXISTS "${TANDEM_GTEST_SOURCE_DIR}/CMakeLists.txt" AND EXISTS /usr/src/googletest/CMakeLists.txt)
      set(TANDEM_GTEST_SOURCE_DIR /usr/src/googletest)
    endif()
    if(NOT EXISTS "${TANDEM_GTEST_SOURCE_DIR}/CMakeLists.txt")
      message(FATAL_ERROR "GoogleTest not found: install libgtest-dev or set TANDEM_GTEST_SOURCE_DIR")
    endif()
    set(INSTALL_GTEST OFF CACHE BOOL "" FORCE)
    add_subdirectory("${TANDEM_GTEST_SOURCE_DIR}" "${CMAKE_BINARY_DIR}/_googletest" EXCLUDE_FROM_ALL SYSTEM)
    if(NOT TARGET GTest::gtest)  # GoogleTest >= 1.11 defines these aliases itself
      add_library(GTest::gtest ALIAS gtest)
      add_library(GTest::gtest_main ALIAS gtest_main)
      add_library(GTest::gmock ALIAS gmock)
    endif()
  endif()
  include(GoogleTest)
endif()

if(TANDEM_BUILD_BENCHMARKS)
  find_package(benchmark QUIET CONFIG)
  if(NOT benchmark_FOUND)
    message(STATUS "Google Benchmark not found: benchmarks are skipped")
    set(TANDEM_BUILD_BENCHMARKS OFF)
  endif()
endif()

if(NOT TANDEM_ENGINE_ONLY AND NOT TANDEM_CONTROLLER_ONLY)  # the agent's and the tools' RPC
  find_package(Protobuf REQUIRED)
  find_package(gRPC CONFIG REQUIRED)
  find_program(TANDEM_GRPC_CPP_PLUGIN grpc_cpp_plugin REQUIRED)
endif()
if(NOT TANDEM_ENGINE_ONLY)
  find_package(yaml-cpp REQUIRED)
  find_package(prometheus-cpp CONFIG REQUIRED)
  find_package(Boost 1.74 REQUIRED)  # header-only parts: Beast, Asio
  find_package(OpenSSL REQUIRED)
endif()
