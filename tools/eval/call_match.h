#pragma once
// Whether a model's tool calls answer a test case: the expected calls are written as the Berkeley
// Function Calling Leaderboard writes its possible answers, and judged as its AST checker judges
// them (tests/tools/test_eval_bfcl_checker.py holds the two to the same verdicts):
//   expected: [{"name": "get_weather", "arguments": {"city": ["Paris", "Paris, France"],
//                                                    "unit": ["celsius", ""]}}]
// Each argument lists the values that count as right; "" in the list means it may be left out.
// Strings compare case-insensitively with spaces and ,./-_*^ removed; an integer is accepted where
// a number is declared; arrays compare element by element (strings standardised); objects key by
// key against the listed dictionaries. An argument the schema does not declare, or the answer does
// not list, is wrong; so is a required one that is missing. Several expected calls match the calls
// in any order (each call used once); no expected call means the right answer is no call at all.

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace tandem::tools::eval {

struct ExpectedCall {
  std::string name;
  nlohmann::json arguments = nlohmann::json::object();  // param -> [acceptable values]
};

struct MadeCall {
  std::string name;
  nlohmann::json arguments;  // the parsed arguments object
};

struct MatchVerdict {
  bool match = false;
  std::string why;  // empty on a match
};

// `tools`: function name -> its `parameters` JSON schema, for the tools the case offered.
MatchVerdict MatchCalls(const std::vector<MadeCall>& calls, const std::vector<ExpectedCall>& expected,
                        const std::map<std::string, nlohmann::json>& tools);

// BFCL's string standardisation: spaces and , . / - _ * ^ removed, lower case, ' -> ".
std::string StandardizeString(const std::string& s);

}  // namespace tandem::tools::eval
