#pragma once
// Skips a GoogleTest test for a reason CI accepts. scripts/check_skips.py lists every skipped
// test by name after each run; under CI=true it fails the run for a skip outside the `gpu` label
// unless the skip message starts with one of these declared reasons. Include only from tests,
// which include <gtest/gtest.h> themselves (common/ depends on the standard library only).

// The host CPU lacks the instruction set of the path under test (the other ISA's paths ran). Use
// as `TANDEM_SKIP_ISA_ABSENT() << "what did not run";`.
#define TANDEM_SKIP_ISA_ABSENT() GTEST_SKIP() << "[isa-absent] "
