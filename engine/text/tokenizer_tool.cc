// tokenizer_tool: line-oriented encode/decode for the oracle test (tests/python/test_tokenizer_oracle.py).
//
//   tokenizer_tool encode --tokenizer FILE [--no-special] < hex lines  > id lines
//   tokenizer_tool decode --tokenizer FILE                < id lines   > hex lines
//   tokenizer_tool stream --tokenizer FILE                < id lines   > hex lines (Detokenizer pieces
//                                                          joined, then Flush)
// Text travels hex-encoded so that any bytes (newlines, invalid UTF-8) fit on one line.

#include <cstdio>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "engine/text/detokenizer.h"
#include "engine/text/tokenizer.h"

namespace {

using tandem::engine::text::Detokenizer;
using tandem::engine::text::Tokenizer;

bool FromHex(const std::string& hex, std::string* out) {
  auto nibble = [](char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
  };
  if (hex.size() % 2 != 0) return false;
  out->clear();
  for (size_t i = 0; i < hex.size(); i += 2) {
    const int hi = nibble(hex[i]), lo = nibble(hex[i + 1]);
    if (hi < 0 || lo < 0) return false;
    out->push_back(static_cast<char>(hi << 4 | lo));
  }
  return true;
}

std::string ToHex(const std::string& bytes) {
  static const char kDigits[] = "0123456789abcdef";
  std::string out;
  for (unsigned char b : bytes) {
    out.push_back(kDigits[b >> 4]);
    out.push_back(kDigits[b & 15]);
  }
  return out;
}

std::vector<int32_t> ParseIds(const std::string& line) {
  std::vector<int32_t> ids;
  std::istringstream in(line);
  long long id;
  while (in >> id) ids.push_back(static_cast<int32_t>(id));
  return ids;
}

int Fail(const std::string& message) {
  std::fprintf(stderr, "tokenizer_tool: %s\n", message.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4 || std::string(argv[2]) != "--tokenizer") {
    return Fail("usage: tokenizer_tool encode|decode|stream --tokenizer FILE [--no-special]");
  }
  const std::string command = argv[1];
  const bool parse_special = !(argc > 4 && std::string(argv[4]) == "--no-special");
  auto tokenizer = Tokenizer::LoadFile(argv[3]);
  if (!tokenizer.ok()) return Fail(tokenizer.status().ToString());
  std::ios::sync_with_stdio(false);
  std::string line, text;
  while (std::getline(std::cin, line)) {
    if (command == "encode") {
      if (!FromHex(line, &text)) return Fail("input line is not hex");
      const std::vector<int32_t> ids = tokenizer->Encode(text, parse_special);
      for (size_t i = 0; i < ids.size(); ++i) std::cout << (i ? " " : "") << ids[i];
      std::cout << '\n';
    } else if (command == "decode") {
      auto bytes = tokenizer->DecodeBytes(ParseIds(line));
      if (!bytes.ok()) return Fail(bytes.status().ToString());
      std::cout << ToHex(*bytes) << '\n';
    } else if (command == "stream") {
      Detokenizer detokenizer(&*tokenizer);
      std::string out;
      for (int32_t id : ParseIds(line)) {
        auto piece = detokenizer.Add(id);
        if (!piece.ok()) return Fail(piece.status().ToString());
        out += *piece;
      }
      out += detokenizer.Flush();
      std::cout << ToHex(out) << '\n';
    } else {
      return Fail("unknown command '" + command + "'");
    }
  }
  return 0;
}
