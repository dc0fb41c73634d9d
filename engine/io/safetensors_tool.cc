// safetensors_tool: a test helper for tests/python/test_safetensors_interop.py.
//
//   safetensors_tool dump PATH                  PATH is a .safetensors file or a checkpoint directory;
//                                               prints {"metadata": {...}, "shards": N, "tensors":
//                                               {name: {"dtype", "shape", "nbytes", "fnv1a64"}}}
//   safetensors_tool write SPEC.json OUT        writes one file
//   safetensors_tool write-checkpoint SPEC.json DIR MAX_SHARD_BYTES
//
// SPEC.json: {"metadata": {k: v}, "tensors": {name: {"dtype": "F32", "shape": [2], "hex": "..."}}}.
// Exit status: 0 on success, 1 with the error on stderr, 2 for a usage error.

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/io/checkpoint.h"
#include "engine/io/checkpoint_writer.h"
#include "engine/io/safetensors_dtype.h"
#include "engine/io/safetensors_file.h"
#include "engine/io/strict_json.h"

namespace tandem::engine::io {
namespace {

using nlohmann::json;

std::string Fnv1a64Hex(std::span<const std::byte> bytes) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (std::byte b : bytes) h = (h ^ static_cast<uint64_t>(b)) * 0x100000001b3ull;
  char out[17];
  std::snprintf(out, sizeof(out), "%016llx", static_cast<unsigned long long>(h));
  return out;
}

json Describe(const TensorView& t) {
  return {{"dtype", SafetensorsDTypeName(t.dtype)},
          {"shape", t.shape},
          {"nbytes", t.data.size()},
          {"fnv1a64", Fnv1a64Hex(t.data)}};
}

Status Dump(const std::string& path) {
  json out = {{"metadata", json::object()}, {"tensors", json::object()}};
  if (std::filesystem::is_directory(path)) {
    ASSIGN_OR_RETURN(Checkpoint checkpoint, Checkpoint::Open(path));
    out["shards"] = checkpoint.shards().size();
    for (std::string_view name : checkpoint.TensorNames())
      out["tensors"][std::string(name)] = Describe(*checkpoint.Find(name));
  } else {
    ASSIGN_OR_RETURN(SafetensorsFile file, SafetensorsFile::Open(path));
    out["shards"] = 1;
    out["metadata"] = file.metadata();
    for (const TensorView& t : file.tensors()) out["tensors"][t.name] = Describe(t);
  }
  std::cout << out.dump(1) << "\n";
  return Status::Ok();
}

StatusOr<std::vector<std::byte>> FromHex(const std::string& hex) {
  if (hex.size() % 2 != 0) return Status::InvalidArgument("odd-length hex string");
  std::vector<std::byte> out(hex.size() / 2);
  for (size_t i = 0; i < out.size(); ++i) {
    unsigned value = 0;
    if (std::sscanf(hex.c_str() + 2 * i, "%2x", &value) != 1) return Status::InvalidArgument("bad hex");
    out[i] = static_cast<std::byte>(value);
  }
  return out;
}

// The spec's tensors; `storage` owns the bytes they borrow.
struct Spec {
  std::vector<std::vector<std::byte>> storage;
  std::vector<TensorToWrite> tensors;
  SafetensorsMetadata metadata;
};

StatusOr<Spec> ReadSpec(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status::NotFound("cannot read " + path);
  std::stringstream text;
  text << in.rdbuf();
  ASSIGN_OR_RETURN(json spec, ParseStrictJson(text.str()));
  Spec out;
  try {
    if (spec.contains("metadata")) out.metadata = spec["metadata"].get<SafetensorsMetadata>();
    out.storage.reserve(spec["tensors"].size());
    for (const auto& [name, t] : spec["tensors"].items()) {
      std::optional<DType> dtype = DTypeFromSafetensorsName(t["dtype"].get<std::string>());
      if (!dtype) return Status::InvalidArgument("unknown dtype for " + name);
      ASSIGN_OR_RETURN(std::vector<std::byte> bytes, FromHex(t["hex"].get<std::string>()));
      out.storage.push_back(std::move(bytes));
      out.tensors.push_back({name, *dtype, t["shape"].get<std::vector<int64_t>>(), out.storage.back()});
    }
  } catch (const json::exception& e) {
    return Status::InvalidArgument(path + ": bad spec: " + e.what());
  }
  return out;
}

Status Run(const std::vector<std::string>& args) {
  if (args.size() == 2 && args[0] == "dump") return Dump(args[1]);
  if (args.size() == 3 && args[0] == "write") {
    ASSIGN_OR_RETURN(Spec spec, ReadSpec(args[1]));
    return WriteSafetensors(args[2], spec.tensors, spec.metadata);
  }
  if (args.size() == 4 && args[0] == "write-checkpoint") {
    if (args[3].empty() || args[3].find_first_not_of("0123456789") != std::string::npos ||
        args[3].size() > 18) {
      return Status::InvalidArgument("MAX_SHARD_BYTES must be a decimal number");
    }
    ASSIGN_OR_RETURN(Spec spec, ReadSpec(args[1]));
    return WriteCheckpoint(args[2], spec.tensors, std::stoull(args[3]), spec.metadata);
  }
  return Status::InvalidArgument("usage");
}

}  // namespace
}  // namespace tandem::engine::io

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  tandem::Status status = tandem::engine::io::Run(args);
  if (status.ok()) return 0;
  if (status.message() == "usage") {
    std::cerr
        << "usage: safetensors_tool dump PATH | write SPEC OUT | write-checkpoint SPEC DIR MAX_SHARD_BYTES\n";
    return 2;
  }
  std::cerr << "safetensors_tool: " << status.ToString() << "\n";
  return 1;
}
