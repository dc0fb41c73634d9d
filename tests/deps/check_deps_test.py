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

    def test_engine_layer_including_higher_layer_fails(self):
        self.write("engine/kv/bad.cc",
                   '#include "engine/kv/page_pool.h"\n#include "engine/model/kv_shape.h"\n')
        self.write("engine/text/bad.h", '#include "engine/runtime/engine.h"\n')
        self.write("engine/core/bad.h", '#include "engine/formats/weights.h"\n')
        self.write("engine/kernels/bad.cc", '#include "engine/kv/page_pool.h"\n')
        self.assertViolation(
            "engine/kv/bad.cc:2: includes engine/model/kv_shape.h: engine/kv/ may use only core, formats")
        self.assertViolation("engine/text/bad.h:1: includes engine/runtime/engine.h")
        self.assertViolation("engine/core/bad.h:1: includes engine/formats/weights.h: "
                             "engine/core/ may use no other layer")
        self.assertViolation("engine/kernels/bad.cc:1")
        self.assertEqual(len(check_deps.check_tree(self.root)), 4)

    def test_engine_layer_including_lower_layer_passes(self):
        self.write("engine/model/forward.cc",
                   '#include "engine/model/forward.h"\n#include "engine/kv/page_pool.h"\n'
                   '#include "engine/text/tokenizer.h"\n#include "engine/core/dtype.h"\n')
        self.write("engine/text/tiktoken_file.cc",
                   '#include "engine/io/mapped_file.h"\n#include "engine/core/dtype.h"\n')
        self.write("engine/runtime/engine.h", '#include "engine/kernels/cpu/matmul.h"\n')
        self.assertEqual(check_deps.check_tree(self.root), [])

    def test_engine_tests_tools_bench_fuzz_cuda_may_include_any_layer(self):
        up = '#include "engine/runtime/serving_engine.h"\n'
        for rel in ("engine/kv/kv_model_test.cc", "engine/io/test_util.h",
                    "engine/text/tool_call_test_util.h", "engine/io/safetensors_tool.cc",
                    "engine/model/tools/model_logits.cc",
                    "engine/text/fuzz/tokenizer_fuzz.cc", "engine/bench/kv_bench.cc",
                    "engine/core/cuda/accelerator_cuda.cc", "engine/layer_check_main.cc"):
            self.write(rel, up)
        self.assertEqual(check_deps.check_tree(self.root), [])

    def test_engine_directory_outside_the_layer_order_fails(self):
        self.write("engine/scheduler/plan.cc", '#include "engine/core/dtype.h"\n')
        self.assertViolation("engine/scheduler/ is not an engine layer")

    def test_engine_layer_links_checked(self):
        self.write("engine/CMakeLists.txt",
                   "target_link_libraries(tandem_engine_model PUBLIC  # not tandem_engine_runtime\n"
                   "  tandem_engine_kv tandem_engine_text)\n"
                   "target_link_libraries(tandem_engine_kv PUBLIC tandem_engine_core\n"
                   "  tandem_engine_model)\n"
                   "target_link_libraries(tandem_engine_text PUBLIC tandem_engine)\n"
                   "target_link_libraries(tandem_engine INTERFACE tandem_engine_runtime)\n")
        self.assertViolation("engine/CMakeLists.txt:3: tandem_engine_kv links tandem_engine_model")
        self.assertViolation("engine/CMakeLists.txt:5: tandem_engine_text links tandem_engine:")
        self.assertEqual(len(check_deps.check_tree(self.root)), 2)

    def test_layers_below_is_transitive(self):
        self.assertEqual(check_deps.layers_below("text"), {"text", "io", "formats", "core"})
        self.assertEqual(check_deps.layers_below("core"), {"core"})
        self.assertEqual(check_deps.layers_below("runtime"), set(check_deps.ENGINE_LAYERS))

    def test_layer_table_matches_engine_cmake(self):
        # The checker's table and the libraries the linker checks (engine/CMakeLists.txt) agree.
        root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
        linked = {layer: sorted(t.removeprefix("tandem_engine_") for t in targets)
                  for _, layer, targets in check_deps.engine_layer_links(root)}
        self.assertEqual(linked, {k: sorted(v) for k, v in check_deps.ENGINE_LAYERS.items()})


if __name__ == "__main__":
    unittest.main()
