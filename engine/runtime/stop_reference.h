#pragma once
// Test oracle shared by output_processor_finish_test.cc and fuzz/stop_string_fuzz.cc: the plain
// definition of stop-string matching that OutputProcessor's streaming matcher must agree with.

#include <string>
#include <vector>

namespace tandem::engine::runtime {

// `text` cut before the stop-string match that ends first (the longest of those when several end
// there); `matched` receives that stop string, or is cleared when none occurs.
inline std::string ReferenceStopCut(const std::string& text, const std::vector<std::string>& stops,
                                    std::string* matched) {
  for (size_t end = 1; end <= text.size(); ++end) {
    const std::string* best = nullptr;
    for (const std::string& s : stops) {
      if (s.size() <= end && text.compare(end - s.size(), s.size(), s) == 0 &&
          (best == nullptr || s.size() > best->size())) {
        best = &s;
      }
    }
    if (best != nullptr) {
      *matched = *best;
      return text.substr(0, end - best->size());
    }
  }
  matched->clear();
  return text;
}

}  // namespace tandem::engine::runtime
