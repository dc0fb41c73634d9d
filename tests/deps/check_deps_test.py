#!/usr/bin/env python3
"""Tests for check_deps.py: each rule catches its violation, and a clean tree passes."""
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_deps  # noqa: E402


class CheckDepsTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.root = self.tmp.name
        self.write("engine/core/ok.h", '#pragma once\n#include <vector>\n#include "common/status.h"\n')
        self.write("engine/formats/cuda/k.cu", '#include <cuda_runtime_api.h>\n#include "engine/core/ok.h"\n')
        self.write("controller/reconcile.cc", '#include <boost/beast.hpp>\n#include "common/status.h"\n')
        self.write("common/status.h", "#pragma once\n#include <string>\n#include <sys/types.h>\n")
        self.write("engine/CMakeLists.txt", "target_link_libraries(tandem_engine PUBLIC tandem_common)\n")
        self.write("controller/CMakeLists.txt", "target_link_libraries(c PUBLIC Boost::headers) # tandem_engine\n")

    def tearDown(self):
        self.tmp.cleanup()

    def write(self, rel, text):
        path = os.path.join(self.root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)

    def assertViolation(self, needle):
        errors = check_deps.check_tree(self.root)
        self.assertTrue(any(needle in e for e in errors), f"expected {needle!r} in {errors}")

    def test_clean_tree_passes(self):
        self.assertEqual(check_deps.check_tree(self.root), [])
        self.assertEqual(check_deps.main(["--root", self.root]), 0)

    def test_engine_including_grpc_fails(self):
        self.write("engine/runtime/bad.cc", "#include <grpcpp/grpcpp.h>\n")
        self.assertViolation("engine/ may not depend on gRPC")
        self.assertEqual(check_deps.main(["--root", self.root]), 1)

    def test_engine_including_beast_yaml_prometheus_fails(self):
        self.write("engine/a.cc", "#include <boost/beast/http.hpp>\n")
        self.write("engine/b.cc", "#  include <yaml-cpp/yaml.h>\n")
        self.write("engine/c.cc", '#include "prometheus/counter.h"\n')
        self.assertViolation("Boost (Beast/Asio)")
        self.assertViolation("yaml-cpp")
        self.assertViolation("prometheus-cpp")

    def test_engine_including_kubernetes_or_higher_layer_fails(self):
        self.write("engine/a.cc", '#include "controller/kube/client.h"\n')
        self.write("engine/b.cc", '#include "agent/config.h"\n')
        self.assertViolation("Kubernetes code")
        self.assertViolation("engine/ may not include a higher layer")

    def test_cuda_outside_cuda_folder_fails(self):
        self.write("engine/kernels/gemv.cc", "#include <cuda_runtime.h>\n")
        self.write("engine/kernels/gemv.cu", "\n")
        self.assertViolation("CUDA headers only under engine/**/cuda/")
        self.assertViolation("CUDA source outside")

    def test_controller_including_engine_or_cuda_fails(self):
        self.write("controller/a.cc", '#include "engine/core/dtype.h"\n')
        self.write("controller/b.cc", "#include <cublas_v2.h>\n")
        self.assertViolation("controller/ never depends on the engine")
        self.assertViolation("controller/ never depends on CUDA")

    def test_common_including_third_party_fails(self):
        self.write("common/x.h", '#include <nlohmann/json.hpp>\n#include "engine/core/dtype.h"\n')
        self.assertViolation("common/x.h:1")
        self.assertViolation("common/x.h:2")

    def test_cmake_links_checked(self):
        self.write("engine/CMakeLists.txt", "target_link_libraries(tandem_engine PUBLIC gRPC::grpc++)\n")
        self.write("controller/CMakeLists.txt", "target_link_libraries(c PRIVATE tandem_engine)\n")
        self.assertViolation("engine/ links a library")
        self.assertViolation("controller/ links the engine")


if __name__ == "__main__":
    unittest.main()
