#pragma once
// Unicode properties for the pre-tokenizer, generated offline (tools/gen_unicode_tables.py) into
// unicode_tables.cc as sorted, disjoint ranges of code points that share the same flags.

#include <cstdint>

namespace tandem::engine::text {

// Flag bits of one code point: its general category (one of the letter kinds, mark, number) plus
// White_Space and Script=Han, which may combine with a category.
enum UnicodeFlag : uint16_t {
  kUpper = 1,         // Lu
  kLower = 2,         // Ll
  kTitle = 4,         // Lt
  kModifier = 8,      // Lm
  kOtherLetter = 16,  // Lo
  kMark = 32,         // M (Mn, Mc, Me)
  kNumber = 64,       // N (Nd, Nl, No)
  kWhiteSpace = 128,
  kHan = 256,
  kLetter = kUpper | kLower | kTitle | kModifier | kOtherLetter,
};

struct UnicodeRange {
  uint32_t first;
  uint32_t last;  // inclusive
  uint16_t flags;
};

extern const char kUnicodeTablesVersion[];
extern const UnicodeRange kUnicodeRanges[];  // sorted by `first`, disjoint
extern const int kUnicodeRangeCount;

}  // namespace tandem::engine::text
