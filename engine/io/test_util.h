#pragma once
// Helpers shared by the engine/io tests: hand-built file images and per-test directories.

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

namespace tandem::engine::io::testing {

// [u64 LE header_length][header][data]; header_length defaults to header.size().
inline std::vector<std::byte> Image(std::string_view header, std::string_view data = "",
                                    int64_t header_length = -1) {
  uint64_t n = header_length < 0 ? header.size() : static_cast<uint64_t>(header_length);
  std::vector<std::byte> out;
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<std::byte>((n >> (8 * i)) & 0xff));
  for (char c : header) out.push_back(static_cast<std::byte>(c));
  for (char c : data) out.push_back(static_cast<std::byte>(c));
  return out;
}

inline std::vector<std::byte> Bytes(std::string_view s) {
  const auto* p = reinterpret_cast<const std::byte*>(s.data());
  return {p, p + s.size()};
}

// A fresh, empty directory under ::testing::TempDir() named after the running test.
inline std::string FreshDir() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) /
                              (std::string("engine_io_") + info->test_suite_name() + "_" + info->name());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

inline void WriteRaw(const std::string& path, const std::vector<std::byte>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

}  // namespace tandem::engine::io::testing
