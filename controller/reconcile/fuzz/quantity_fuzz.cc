// libFuzzer target for ParseQuantityBytes, the Kubernetes resource quantity of kvCacheMemory
// (scripts/fuzz.sh quantity). Input: byte 0 bit 0 clear: the rest is the quantity string; set:
// the rest is a JSON document, the quantity value.
// Invariants: nothing throws; an error is InvalidArgument with a message. A string is held to an
// exact reading of Kubernetes' grammar (a sign, digits with at most one ".", then Ki..Ei,
// n u m "" k M G T P E, or e/E and a signed exponent) rounded up to whole bytes, as
// resource.Quantity.Value() rounds: in the grammar, not negative and at most 9e18 bytes, it parses
// to that value (or one off, where the value lies within a long double's error of a whole
// number); past int64, negative or outside the grammar, it is refused. A parsed value printed
// back (as a JSON integer, bare, with its largest exact suffix) parses to itself.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <string>
#include <string_view>

#include "controller/reconcile/deployment_spec.h"

namespace {

using tandem::StatusCode;
using tandem::StatusOr;
using tandem::controller::reconcile::json;
using tandem::controller::reconcile::ParseQuantityBytes;

constexpr uint64_t kInt64Max = std::numeric_limits<int64_t>::max();
// Below this the parser must succeed; between it and int64's end it may refuse ("too large")
// because it rounds through a long double.
constexpr uint64_t kMustFit = 9'000'000'000'000'000'000ull;

void Require(bool condition) {
  if (!condition) std::abort();
}

// A quantity string read exactly.
struct Exact {
  bool grammar = false;    // Kubernetes' quantity grammar
  bool either = false;     // refusing and accepting are both right (-0, an exponent past int32)
  bool negative = false;   // below zero
  bool too_large = false;  // ceil(value) > int64 max
  uint64_t bytes = 0;      // ceil(value) otherwise
  // The value lies within a long double's error (a loose 2^-58 of it) of a whole number, and not
  // on one: rounded through a long double, its ceiling may come out one either side.
  bool near_whole = false;
};

// Digits (no leading zeros, "" for zero) times 2.
std::string Double(const std::string& digits) {
  std::string out(digits.size() + 1, '0');
  int carry = 0;
  for (size_t i = digits.size(); i-- > 0;) {
    const int d = (digits[i] - '0') * 2 + carry;
    out[i + 1] = static_cast<char>('0' + d % 10);
    carry = d / 10;
  }
  out[0] = static_cast<char>('0' + carry);
  return out[0] == '0' ? out.substr(1) : out;
}

// The suffix's power of two and of ten, false when it is not one.
bool ReadSuffix(std::string_view suffix, int* pow2, int64_t* pow10, bool* exponent_past_int32) {
  static constexpr std::pair<std::string_view, int> kBinary[] = {{"Ki", 10}, {"Mi", 20}, {"Gi", 30},
                                                                 {"Ti", 40}, {"Pi", 50}, {"Ei", 60}};
  static constexpr std::pair<std::string_view, int> kDecimal[] = {{"n", -9}, {"u", -6}, {"m", -3}, {"", 0},
                                                                  {"k", 3},  {"M", 6},  {"G", 9},  {"T", 12},
                                                                  {"P", 15}, {"E", 18}};
  for (const auto& [name, p] : kBinary) {
    if (suffix == name) return *pow2 = p, true;
  }
  for (const auto& [name, p] : kDecimal) {
    if (suffix == name) return *pow10 = p, true;
  }
  if (suffix.size() < 2 || (suffix[0] != 'e' && suffix[0] != 'E')) return false;
  size_t i = 1;
  const bool minus = suffix[i] == '-';
  if (suffix[i] == '+' || suffix[i] == '-') ++i;
  if (i == suffix.size()) return false;
  int64_t e = 0;
  for (; i < suffix.size(); ++i) {
    if (suffix[i] < '0' || suffix[i] > '9') return false;
    e = std::min<int64_t>(e * 10 + (suffix[i] - '0'), int64_t{1} << 40);
  }
  *exponent_past_int32 = e > (minus ? 2147483648 : 2147483647);
  *pow10 = minus ? -e : e;
  return true;
}

Exact ReadExact(std::string_view s) {
  Exact out;
  size_t i = 0;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) out.negative = s[i++] == '-';
  std::string digits;
  int64_t fraction_digits = 0;
  size_t count = 0;
  for (; i < s.size() && s[i] >= '0' && s[i] <= '9'; ++i, ++count) digits += s[i];
  if (i < s.size() && s[i] == '.') {
    for (++i; i < s.size() && s[i] >= '0' && s[i] <= '9'; ++i, ++count, ++fraction_digits) digits += s[i];
  }
  int pow2 = 0;
  int64_t pow10 = 0;
  bool past_int32 = false;
  if (count == 0 || !ReadSuffix(s.substr(i), &pow2, &pow10, &past_int32)) return out;
  out.grammar = true;
  out.either = past_int32;
  digits.erase(0, std::min(digits.find_first_not_of('0'), digits.size()));
  if (digits.empty()) {  // zero, whatever the suffix
    out.either = out.either || out.negative;
    out.negative = false;
    return out;
  }
  // value = digits * 2^pow2 * 10^e10
  const int64_t e10 = pow10 - fraction_digits;
  const int64_t magnitude = static_cast<int64_t>(digits.size()) + e10;  // value >= 10^(magnitude-1)
  if (magnitude > 20) {
    out.too_large = true;
    return out;
  }
  if (magnitude < -40) {  // below 10^-40 * 2^60: above zero by less than any long double error
    out.bytes = 1;
    out.near_whole = true;
    return out;
  }
  for (int k = 0; k < pow2; ++k) digits = Double(digits);
  std::string whole = digits, fraction;
  if (e10 >= 0) {
    whole.append(static_cast<size_t>(e10), '0');
  } else {
    const size_t cut = static_cast<size_t>(-e10);
    const size_t keep = whole.size() > cut ? whole.size() - cut : 0;
    fraction = std::string(cut - (whole.size() - keep), '0') + whole.substr(keep);
    whole.resize(keep);
  }
  unsigned __int128 v = 0;
  for (char c : whole) {
    v = v * 10 + static_cast<unsigned>(c - '0');
    if (v > kInt64Max) break;
  }
  const bool fractional = fraction.find_first_not_of('0') != std::string::npos;
  if (fractional) {
    const long double f = std::strtold(("0." + fraction.substr(0, 40)).c_str(), nullptr);
    out.near_whole = std::min(f, 1 - f) < std::ldexp(static_cast<long double>(v) + 1, -58);
    ++v;
  }
  out.too_large = v > kInt64Max;
  out.bytes = out.too_large ? 0 : static_cast<uint64_t>(v);
  return out;
}

// Printed back (as a JSON integer; as a string bare and with its largest exact binary and decimal
// suffix, below kMustFit), a parsed value parses to itself.
void CheckRoundTrip(int64_t v) {
  Require(ParseQuantityBytes(json(v)).ok() && *ParseQuantityBytes(json(v)) == v);
  if (static_cast<uint64_t>(v) > kMustFit) return;
  StatusOr<int64_t> bare = ParseQuantityBytes(json(std::to_string(v)));
  Require(bare.ok() && *bare == v);
  static constexpr const char* kBinary[] = {"", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"};
  static constexpr const char* kDecimal[] = {"", "k", "M", "G", "T", "P", "E"};
  int b = 0, d = 0;
  int64_t bin = v, dec = v;
  while (b < 6 && bin != 0 && bin % 1024 == 0) bin /= 1024, ++b;
  while (d < 6 && dec != 0 && dec % 1000 == 0) dec /= 1000, ++d;
  StatusOr<int64_t> binary = ParseQuantityBytes(json(std::to_string(bin) + kBinary[b]));
  Require(binary.ok() && *binary == v);
  StatusOr<int64_t> decimal = ParseQuantityBytes(json(std::to_string(dec) + kDecimal[d]));
  Require(decimal.ok() && *decimal == v);
}

void CheckRefused(const StatusOr<int64_t>& got) {
  Require(!got.ok() && got.status().code() == StatusCode::kInvalidArgument &&
          !got.status().message().empty());
}

void CheckString(const std::string& s) {
  const StatusOr<int64_t> got = ParseQuantityBytes(json(s));
  const Exact want = ReadExact(s);
  if (!got.ok()) {
    CheckRefused(got);
    const bool may_refuse =
        !want.grammar || want.either || want.negative || want.too_large || want.bytes > kMustFit;
    Require(may_refuse);
    return;
  }
  Require(*got >= 0);
  Require(want.grammar && !want.too_large && (!want.negative || want.either));
  const uint64_t g = static_cast<uint64_t>(*got);
  Require(g == want.bytes || (want.near_whole && (g + 1 == want.bytes || g == want.bytes + 1)));
  CheckRoundTrip(*got);
}

void CheckJson(const json& q) {
  if (q.is_string()) return CheckString(q.get<std::string>());
  const StatusOr<int64_t> got = ParseQuantityBytes(q);
  const bool fits = q.is_number_unsigned() ? q.get<uint64_t>() <= kInt64Max
                                           : q.is_number_integer() && q.get<int64_t>() >= 0;  // -0 too
  if (fits) {
    Require(got.ok() && *got == q.get<int64_t>());
    return CheckRoundTrip(*got);
  }
  // Negative or past int64 integers, floats (the CRD takes an integer or a string), the rest.
  CheckRefused(got);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  if ((data[0] & 1) == 0) {
    CheckString(rest);
    return 0;
  }
  const json q = json::parse(rest, nullptr, /*allow_exceptions=*/false);
  if (!q.is_discarded()) CheckJson(q);
  return 0;
}
