# Test suites that configure leaves out for a missing dependency must not vanish silently.
#
#   tandem_suite_not_registered(<suite> <what is missing>)
#       records the suite; configure prints a warning for it, and the list goes to
#       <build>/unregistered-suites.txt, which scripts/test.sh's closing count names.
#   tandem_report_unregistered_suites()
#       called once, after every suite is declared (the end of tests/CMakeLists.txt).
#
# TANDEM_REQUIRE_ALL_TESTS (default ON when the environment has CI=true, as CI runs) makes any
# such suite a configure error naming it and what it needs.
if("$ENV{CI}" STREQUAL "true")
  set(tandem_require_default ON)
else()
  set(tandem_require_default OFF)
endif()
option(TANDEM_REQUIRE_ALL_TESTS "A test suite whose dependency is missing is a configure error"
       ${tandem_require_default})
set_property(GLOBAL PROPERTY TANDEM_UNREGISTERED_SUITES "")

function(tandem_suite_not_registered suite missing)
  set_property(GLOBAL APPEND PROPERTY TANDEM_UNREGISTERED_SUITES "${suite}: ${missing}")
  message(WARNING "Tandem: test suite ${suite} not registered: ${missing}")
endfunction()

function(tandem_report_unregistered_suites)
  get_property(suites GLOBAL PROPERTY TANDEM_UNREGISTERED_SUITES)
  list(JOIN suites "\n" text)
  if(suites)
    file(WRITE "${CMAKE_BINARY_DIR}/unregistered-suites.txt" "${text}\n")
  else()
    file(WRITE "${CMAKE_BINARY_DIR}/unregistered-suites.txt" "")
  endif()
  if(suites AND TANDEM_REQUIRE_ALL_TESTS)
    list(LENGTH suites n)
    message(FATAL_ERROR "Tandem: ${n} test suites cannot be registered (TANDEM_REQUIRE_ALL_TESTS is on, "
                        "as it is with CI=true):\n  ${text}\nInstall them with scripts/install-deps.sh.")
  endif()
endfunction()
