# tandem_test(<name> SOURCES ... [LIBS ...] [LABELS unit|integration|gpu|slow ...] [TIMEOUT s])
#
# One GoogleTest binary beside its code; each TEST() becomes a CTest test carrying the labels, so
# `ctest -L unit` or `ctest -LE gpu` select by kind. Tests are listed when CTest runs (not at
# build time), which keeps the build fast and works under sanitizers.
include(TandemSuites)

function(tandem_test name)
  cmake_parse_arguments(ARG "" "TIMEOUT" "SOURCES;LIBS;LABELS" ${ARGN})
  if(NOT ARG_LABELS)
    set(ARG_LABELS unit)
  endif()
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 300)
  endif()
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_LIBS} GTest::gtest_main GTest::gtest)
  gtest_discover_tests(${name}
    TEST_PREFIX "${name}."
    DISCOVERY_MODE PRE_TEST
    DISCOVERY_TIMEOUT 60
    PROPERTIES LABELS "${ARG_LABELS}" TIMEOUT ${ARG_TIMEOUT})
endfunction()
