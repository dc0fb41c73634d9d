#!/usr/bin/env python3
"""Dependency-direction check for the Tandem tree (ARCHITECTURE.md, "may depend on").

Fails (exit 1, one line per violation) when:
  - engine/ includes or links gRPC, Protobuf, Boost (Beast/Asio), yaml-cpp, prometheus-cpp,
    Kubernetes code, or a higher layer (agent/, controller/, proto/, tools/);
  - engine/ uses CUDA headers or .cu files outside an engine/**/cuda/ folder;
  - controller/ includes or links engine/ or CUDA (and never the agent);
  - common/ includes anything but the standard library and common/ itself;
  - a layer of the engine (engine/<layer>/, ENGINE_LAYERS) includes a layer that is not below it,
    or its tandem_engine_<layer> library links one in engine/CMakeLists.txt. Tests (*_test.cc and
    their *test_util.h helpers), *_tool.cc programs and the bench/, tools/, fuzz/ and cuda/
    folders are not in the layer libraries and may include any part of the engine.
"""
import argparse
import os
import re
import sys

SOURCE_EXT = (".h", ".hpp", ".cc", ".cpp", ".cu", ".cuh")
INCLUDE_RE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')

THIRD_PARTY_NET = [
    (re.compile(r"^grpc(pp|\+\+)?/"), "gRPC"),
    (re.compile(r"^google/protobuf/"), "Protobuf"),
    (re.compile(r"^boost/"), "Boost (Beast/Asio)"),
    (re.compile(r"^yaml-cpp/"), "yaml-cpp"),
    (re.compile(r"^prometheus/"), "prometheus-cpp"),
    (re.compile(r"^openssl/"), "OpenSSL"),
    (re.compile(r"(^|/)kube(rnetes)?[/_]"), "Kubernetes code"),
    (re.compile(r"\.pb\.h$"), "generated Protobuf code"),
]
CUDA_HEADERS = re.compile(r"^(cuda[_a-z0-9]*\.h|cuda/|cublas|cublasLt|nccl|cub/|thrust/|cute/|cutlass/|curand|nvtx|cusparse|cufft)")
HIGHER_THAN_ENGINE = re.compile(r"^(agent|controller|proto|tools|tests)/")

# Each engine layer and the layers directly below it, as linked in engine/CMakeLists.txt; a layer
# may include any layer reachable from it (docs/architecture.md, "Dependency rules").
ENGINE_LAYERS = {
    "core": [],
    "formats": ["core"],
    "io": ["core", "formats"],
    "kernels": ["core", "formats"],
    "kv": ["core", "formats"],
    "text": ["io"],
    "model": ["core", "formats", "io", "kernels", "kv", "text"],
    "runtime": ["core", "kv", "model", "text"],
}
ENGINE_INCLUDE_RE = re.compile(r"^engine/([^/]+)/")
ENGINE_EXEMPT_DIRS = ("bench", "tools", "fuzz", "cuda")
ENGINE_LINK_RE = re.compile(r"target_link_libraries\(\s*tandem_engine_(\w+)\b([^)]*)\)")
ENGINE_TARGET_RE = re.compile(r"\btandem_engine\w*")

CMAKE_LINK_RULES = {
    "engine": [(re.compile(r"gRPC::|protobuf::|yaml-cpp|prometheus-cpp::|Boost::|OpenSSL::|tandem_(agent|controller|proto)\b"),
                "engine/ links a library it may not depend on")],
    "controller": [(re.compile(r"\btandem_engine|CUDA::|tandem_agent\b"),
                    "controller/ links the engine, the agent or CUDA")],
}


def iter_sources(root, top):
    base = os.path.join(root, top)
    for dirpath, _, files in os.walk(base):
        for name in sorted(files):
            if name.endswith(SOURCE_EXT):
                path = os.path.join(dirpath, name)
                yield os.path.relpath(path, root), path


def includes(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        for lineno, line in enumerate(f, 1):
            m = INCLUDE_RE.match(line)
            if m:
                yield lineno, m.group(1), m.group(2)


def in_cuda_dir(rel):
    return "/cuda/" in "/" + rel.replace(os.sep, "/")


def check_engine(root):
    errors = []
    for rel, path in iter_sources(root, "engine"):
        if rel.endswith((".cu", ".cuh")) and not in_cuda_dir(rel):
            errors.append(f"{rel}: CUDA source outside an engine/**/cuda/ folder")
        for lineno, _, inc in includes(path):
            for pattern, what in THIRD_PARTY_NET:
                if pattern.search(inc):
                    errors.append(f"{rel}:{lineno}: includes {inc}: engine/ may not depend on {what}")
            if HIGHER_THAN_ENGINE.match(inc):
                errors.append(f"{rel}:{lineno}: includes {inc}: engine/ may not include a higher layer")
            if CUDA_HEADERS.match(inc) and not in_cuda_dir(rel):
                errors.append(f"{rel}:{lineno}: includes {inc}: CUDA headers only under engine/**/cuda/")
    return errors


def layers_below(layer):
    """The layers `layer` may use: everything reachable through ENGINE_LAYERS, and itself."""
    seen, todo = {layer}, list(ENGINE_LAYERS[layer])
    while todo:
        below = todo.pop()
        if below not in seen:
            seen.add(below)
            todo.extend(ENGINE_LAYERS[below])
    return seen


def may_use(layer, allowed):
    others = sorted(allowed - {layer})
    if not others:
        return f"engine/{layer}/ may use no other layer"
    return f"engine/{layer}/ may use only {', '.join(others)}"


def in_engine_layer_library(rel):
    """True for a source the layer libraries build: not a test, tool, benchmark, fuzzer or CUDA."""
    parts = rel.replace(os.sep, "/").split("/")
    name = parts[-1]
    if name.endswith(("_test.cc", "test_util.h", "_tool.cc")):
        return False
    return not any(p in ENGINE_EXEMPT_DIRS for p in parts[1:-1])


def check_engine_layers(root):
    errors = []
    for rel, path in iter_sources(root, "engine"):
        parts = rel.replace(os.sep, "/").split("/")
        if len(parts) < 3 or not in_engine_layer_library(rel):
            continue
        layer = parts[1]
        if layer not in ENGINE_LAYERS:
            errors.append(f"{rel}: engine/{layer}/ is not an engine layer "
                          "(add it to ENGINE_LAYERS and engine/CMakeLists.txt)")
            continue
        allowed = layers_below(layer)
        for lineno, _, inc in includes(path):
            m = ENGINE_INCLUDE_RE.match(inc)
            if m and m.group(1) not in allowed:
                errors.append(f"{rel}:{lineno}: includes {inc}: {may_use(layer, allowed)}")
    return errors + check_engine_layer_links(root)


def engine_layer_links(root):
    """[(line, layer, [linked targets])] for each target_link_libraries(tandem_engine_<layer> ...)."""
    path = os.path.join(root, "engine", "CMakeLists.txt")
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as f:
        code = "".join(line.split("#", 1)[0].rstrip("\n") + "\n" for line in f)
    links = []
    for m in ENGINE_LINK_RE.finditer(code):
        if m.group(1) in ENGINE_LAYERS:
            targets = [t.group(0) for t in ENGINE_TARGET_RE.finditer(m.group(2))]
            links.append((code.count("\n", 0, m.start()) + 1, m.group(1), targets))
    return links


def check_engine_layer_links(root):
    """engine/CMakeLists.txt links each tandem_engine_<layer> only to layers below it."""
    errors = []
    for lineno, layer, targets in engine_layer_links(root):
        allowed = layers_below(layer)
        for target in targets:
            if target.removeprefix("tandem_engine_") not in allowed - {layer}:
                errors.append(f"engine/CMakeLists.txt:{lineno}: tandem_engine_{layer} links {target}: "
                              f"{may_use(layer, allowed)}")
    return errors


def check_controller(root):
    errors = []
    for rel, path in iter_sources(root, "controller"):
        if rel.endswith((".cu", ".cuh")):
            errors.append(f"{rel}: CUDA source in controller/")
        for lineno, _, inc in includes(path):
            if inc.startswith(("engine/", "agent/")):
                errors.append(f"{rel}:{lineno}: includes {inc}: controller/ never depends on the engine or agent")
            if CUDA_HEADERS.match(inc):
                errors.append(f"{rel}:{lineno}: includes {inc}: controller/ never depends on CUDA")
    return errors


def check_common(root):
    errors = []
    for rel, path in iter_sources(root, "common"):
        for lineno, kind, inc in includes(path):
            if kind == '"' and not inc.startswith("common/"):
                errors.append(f"{rel}:{lineno}: includes {inc}: common/ depends on the standard library only")
            if kind == "<" and not rel.endswith("_test.cc") and "/" in inc and not inc.startswith(("sys/", "bits/")):
                errors.append(f"{rel}:{lineno}: includes <{inc}>: common/ depends on the standard library only")
    return errors


def check_cmake(root):
    errors = []
    for top, rules in CMAKE_LINK_RULES.items():
        for dirpath, _, files in os.walk(os.path.join(root, top)):
            if "CMakeLists.txt" not in files:
                continue
            path = os.path.join(dirpath, "CMakeLists.txt")
            rel = os.path.relpath(path, root)
            with open(path, encoding="utf-8") as f:
                for lineno, line in enumerate(f, 1):
                    code = line.split("#", 1)[0]
                    for pattern, what in rules:
                        if pattern.search(code):
                            errors.append(f"{rel}:{lineno}: {what}: {code.strip()}")
    return errors


def check_tree(root):
    return (check_engine(root) + check_engine_layers(root) + check_controller(root)
            + check_common(root) + check_cmake(root))


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", default=os.path.join(os.path.dirname(__file__), "..", ".."))
    args = parser.parse_args(argv)
    root = os.path.abspath(args.root)
    if not os.path.isdir(os.path.join(root, "engine")):
        print(f"check_deps: {root} has no engine/ folder", file=sys.stderr)
        return 2
    errors = check_tree(root)
    for e in errors:
        print(e)
    if errors:
        print(f"check_deps: {len(errors)} dependency-direction violation(s)")
        return 1
    print("check_deps: layering OK")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
