#include "engine/io/safetensors_header.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <tuple>
#include <utility>

#include "engine/io/safetensors_dtype.h"
#include "engine/io/strict_json.h"

namespace tandem::engine::io {
namespace {

using nlohmann::json;

constexpr std::string_view kMetadataKey = "__metadata__";

uint64_t ReadU64Le(const std::byte* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<uint64_t>(p[i]);
  return v;
}

Status TensorError(std::string_view name, const std::string& what) {
  return Status::DataLoss("tensor '" + std::string(name) + "': " + what);
}

StatusOr<std::vector<int64_t>> ParseShape(std::string_view name, const json& shape) {
  if (!shape.is_array()) return TensorError(name, "\"shape\" is not an array");
  std::vector<int64_t> dims;
  dims.reserve(shape.size());
  for (const json& dim : shape) {
    if (dim.is_number_integer() && !dim.is_number_unsigned()) {
      return TensorError(name, "shape has a negative dimension " + dim.dump());
    }
    if (!dim.is_number_unsigned())
      return TensorError(name, "shape has a non-integer dimension " + dim.dump());
    auto value = dim.get<uint64_t>();
    if (value > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return TensorError(name, "shape dimension " + std::to_string(value) + " is too large");
    }
    dims.push_back(static_cast<int64_t>(value));
  }
  return dims;
}

// Offsets come back relative to the data section, checked against its size.
StatusOr<std::pair<uint64_t, uint64_t>> ParseOffsets(std::string_view name, const json& offsets,
                                                     uint64_t data_bytes) {
  if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() ||
      !offsets[1].is_number_unsigned()) {
    return TensorError(name, "\"data_offsets\" is not [begin, end] with non-negative integers");
  }
  auto begin = offsets[0].get<uint64_t>();
  auto end = offsets[1].get<uint64_t>();
  if (begin > end) return TensorError(name, "data_offsets " + offsets.dump() + " end before they begin");
  if (end > data_bytes) {
    return TensorError(name, "data_offsets " + offsets.dump() + " run past the " +
                                 std::to_string(data_bytes) + "-byte data section");
  }
  return std::make_pair(begin, end);
}

StatusOr<SafetensorsTensorInfo> ParseTensor(std::string_view name, const json& entry, uint64_t data_offset,
                                            uint64_t data_bytes) {
  if (!entry.is_object()) return TensorError(name, "entry is not a JSON object");
  auto dtype_it = entry.find("dtype");
  auto shape_it = entry.find("shape");
  auto offsets_it = entry.find("data_offsets");
  if (dtype_it == entry.end() || shape_it == entry.end() || offsets_it == entry.end()) {
    return TensorError(name, "entry needs \"dtype\", \"shape\" and \"data_offsets\"");
  }
  if (!dtype_it->is_string()) return TensorError(name, "\"dtype\" is not a string");
  const auto& dtype_name = dtype_it->get_ref<const std::string&>();
  std::optional<DType> dtype = DTypeFromSafetensorsName(dtype_name);
  if (!dtype) {
    return Status::InvalidArgument("tensor '" + std::string(name) + "': unsupported dtype '" + dtype_name +
                                   "'");
  }
  ASSIGN_OR_RETURN(std::vector<int64_t> shape, ParseShape(name, *shape_it));
  ASSIGN_OR_RETURN(auto offsets, ParseOffsets(name, *offsets_it, data_bytes));

  uint64_t bytes = DTypeBytes(*dtype);
  for (int64_t dim : shape) {
    if (__builtin_mul_overflow(bytes, static_cast<uint64_t>(dim), &bytes)) {
      return TensorError(name, "shape " + shape_it->dump() + " x " + dtype_name + " overflows 64 bits");
    }
  }
  if (bytes != offsets.second - offsets.first) {
    return TensorError(name, "shape " + shape_it->dump() + " of " + dtype_name + " needs " +
                                 std::to_string(bytes) + " bytes but data_offsets " + offsets_it->dump() +
                                 " hold " + std::to_string(offsets.second - offsets.first));
  }
  return SafetensorsTensorInfo{std::string(name), *dtype, std::move(shape), data_offset + offsets.first,
                               data_offset + offsets.second};
}

StatusOr<std::map<std::string, std::string>> ParseMetadata(const json& value) {
  if (!value.is_object()) return Status::DataLoss("\"__metadata__\" is not a JSON object");
  std::map<std::string, std::string> metadata;
  for (const auto& [key, item] : value.items()) {
    if (!item.is_string()) return Status::DataLoss("\"__metadata__\" value of '" + key + "' is not a string");
    metadata.emplace(key, item.get<std::string>());
  }
  return metadata;
}

// REQUIRES: every tensor lies inside the data section (ParseTensor checked it).
Status CheckNoOverlap(const std::vector<SafetensorsTensorInfo>& tensors) {
  std::vector<const SafetensorsTensorInfo*> by_offset;
  for (const auto& t : tensors) {
    if (t.size_bytes() > 0) by_offset.push_back(&t);
  }
  std::sort(by_offset.begin(), by_offset.end(), [](const auto* a, const auto* b) {
    return std::tie(a->begin, a->end) < std::tie(b->begin, b->end);
  });
  const SafetensorsTensorInfo* furthest = nullptr;  // the tensor reaching furthest so far
  for (const auto* t : by_offset) {
    if (furthest != nullptr && t->begin < furthest->end) {
      return Status::DataLoss("tensors '" + furthest->name + "' and '" + t->name + "' overlap");
    }
    if (furthest == nullptr || t->end > furthest->end) furthest = t;
  }
  return Status::Ok();
}

StatusOr<SafetensorsLayout> ParseImage(std::span<const std::byte> image) {
  if (image.size() < 8) {
    return Status::DataLoss("file is " + std::to_string(image.size()) +
                            " bytes, shorter than the 8-byte header length");
  }
  uint64_t header_bytes = ReadU64Le(image.data());
  if (header_bytes > kMaxSafetensorsHeaderBytes) {
    return Status::DataLoss("header length " + std::to_string(header_bytes) + " exceeds the limit of " +
                            std::to_string(kMaxSafetensorsHeaderBytes) + " bytes");
  }
  if (header_bytes > image.size() - 8) {
    return Status::DataLoss("header length " + std::to_string(header_bytes) + " runs past the end of the " +
                            std::to_string(image.size()) + "-byte file");
  }
  std::string_view text(reinterpret_cast<const char*>(image.data() + 8), header_bytes);
  StatusOr<json> header = ParseStrictJson(text);
  if (!header.ok()) return header.status().WithContext("header");
  if (!header->is_object()) return Status::DataLoss("header is not a JSON object");

  SafetensorsLayout layout;
  layout.data_offset = 8 + header_bytes;
  uint64_t data_bytes = image.size() - layout.data_offset;
  for (const auto& [name, entry] : header->items()) {
    if (name == kMetadataKey) {
      ASSIGN_OR_RETURN(layout.metadata, ParseMetadata(entry));
      continue;
    }
    ASSIGN_OR_RETURN(SafetensorsTensorInfo info, ParseTensor(name, entry, layout.data_offset, data_bytes));
    layout.tensors.push_back(std::move(info));
  }
  // nlohmann's object is a std::map, so tensors arrive sorted by name; keep that a stated fact.
  std::sort(layout.tensors.begin(), layout.tensors.end(),
            [](const auto& a, const auto& b) { return a.name < b.name; });
  RETURN_IF_ERROR(CheckNoOverlap(layout.tensors));
  return layout;
}

}  // namespace

StatusOr<SafetensorsLayout> ParseSafetensors(std::span<const std::byte> image, std::string_view file_name) {
  StatusOr<SafetensorsLayout> layout = ParseImage(image);
  if (!layout.ok()) return layout.status().WithContext(file_name);
  return layout;
}

}  // namespace tandem::engine::io
