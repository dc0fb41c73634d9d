#!/usr/bin/env python3
"""Dependency-direction check for the Tandem tree (ARCHITECTURE.md, "may depend on").

Fails (exit 1, one line per violation) when:
  - engine/ includes or links gRPC, Protobuf, Boost (Beast/Asio), yaml-cpp, prometheus-cpp,
    Kubernetes code, or a higher layer (agent/, controller/, proto/, tools/);
  - engine/ uses CUDA headers or .cu files outside an engine/**/cuda/ folder;
  - controller/ includes or links engine/ or CUDA (and never the agent);
  - common/ includes anything but the standard library and common/ itself.
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
    return check_engine(root) + check_controller(root) + check_common(root) + check_cmake(root)


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
