#!/usr/bin/env python3
"""Interop between the engine's safetensors code and the reference `safetensors` package.

(a) files written by safetensors (numpy API, and the raw API for BF16/FP8) are read by
    `safetensors_tool dump`, which reports dtype, shape, size and an FNV-1a-64 of each tensor;
(b) files and sharded checkpoints written by `safetensors_tool write[-checkpoint]` (our writer) are
    loaded by safetensors and compared byte for byte.

Run: SAFETENSORS_TOOL=build/engine/safetensors_tool .venv/bin/python tests/python/test_safetensors_interop.py
(CTest passes the tool's path: `ctest -R interop`.)
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import numpy as np
import safetensors
import safetensors.numpy

TOOL = os.environ.get("SAFETENSORS_TOOL", "")

NUMPY_DTYPES = {
    "F64": np.float64, "F32": np.float32, "F16": np.float16,
    "I64": np.int64, "I32": np.int32, "I16": np.int16, "I8": np.int8,
    "U64": np.uint64, "U32": np.uint32, "U16": np.uint16, "U8": np.uint8, "BOOL": np.bool_,
}
# dtypes numpy lacks: the raw safetensors API names them the way torch does.
RAW_DTYPES = {"BF16": ("bfloat16", 2), "F8_E4M3": ("float8_e4m3fn", 1), "F8_E5M2": ("float8_e5m2", 1)}
SHAPES = [(), (0,), (1,), (3, 0, 2), (7, 13), (2, 3, 4)]


def fnv1a64(data):
    h = 0xCBF29CE484222325
    for b in bytes(data):
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return "%016x" % h


def random_array(rng, dtype, shape):
    if dtype == np.bool_:
        return rng.integers(0, 2, size=shape).astype(np.bool_)
    if np.issubdtype(dtype, np.floating):
        return rng.standard_normal(size=shape).astype(dtype)
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, size=shape, dtype=dtype, endpoint=True)


def run_tool(*args, check=True):
    proc = subprocess.run([TOOL, *args], capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise AssertionError("safetensors_tool %s failed (%d): %s" % (args, proc.returncode, proc.stderr))
    return proc


def dump(path):
    return json.loads(run_tool("dump", path).stdout)


class ReferenceWritesEngineReads(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="st_interop_")
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.rng = np.random.default_rng(1234)

    def check_dump(self, got, expected):
        """expected: name -> (dtype name, shape, raw bytes)."""
        self.assertEqual(sorted(got["tensors"]), sorted(expected))
        for name, (dtype, shape, raw) in expected.items():
            t = got["tensors"][name]
            self.assertEqual(t["dtype"], dtype, name)
            self.assertEqual(tuple(t["shape"]), tuple(shape), name)
            self.assertEqual(t["nbytes"], len(raw), name)
            self.assertEqual(t["fnv1a64"], fnv1a64(raw), name)

    def test_numpy_dtypes_and_shapes(self):
        tensors, expected = {}, {}
        for dtype_name, dtype in NUMPY_DTYPES.items():
            for i, shape in enumerate(SHAPES):
                name = "%s.%d" % (dtype_name.lower(), i)
                tensors[name] = random_array(self.rng, dtype, shape)
                expected[name] = (dtype_name, shape, tensors[name].tobytes())
        path = os.path.join(self.dir, "many.safetensors")
        metadata = {"format": "np", "note": "unicode ✓", "empty": ""}
        safetensors.numpy.save_file(tensors, path, metadata=metadata)
        got = dump(path)
        self.check_dump(got, expected)
        self.assertEqual(got["metadata"], metadata)

    def test_raw_bf16_and_fp8(self):
        tensors, expected = {}, {}
        for dtype_name, (torch_name, size) in RAW_DTYPES.items():
            for i, shape in enumerate(SHAPES):
                raw = self.rng.bytes(int(np.prod(shape, dtype=np.int64)) * size)
                name = "%s.%d" % (dtype_name.lower(), i)
                tensors[name] = {"dtype": torch_name, "shape": list(shape), "data": raw}
                expected[name] = (dtype_name, shape, raw)
        path = os.path.join(self.dir, "raw.safetensors")
        safetensors.serialize_file(tensors, path)
        self.check_dump(dump(path), expected)

    def test_no_tensors(self):
        path = os.path.join(self.dir, "none.safetensors")
        safetensors.numpy.save_file({}, path, metadata={"k": "v"})
        got = dump(path)
        self.assertEqual(got["tensors"], {})
        self.assertEqual(got["metadata"], {"k": "v"})

    def test_sharded_checkpoint(self):
        expected, weight_map = {}, {}
        for shard in range(3):
            file_name = "model-%05d-of-00003.safetensors" % (shard + 1)
            tensors = {"layers.%d.%s" % (shard, kind): random_array(self.rng, np.float32, (4, 5)) for kind in "qkv"}
            safetensors.numpy.save_file(tensors, os.path.join(self.dir, file_name))
            for name, array in tensors.items():
                weight_map[name] = file_name
                expected[name] = ("F32", array.shape, array.tobytes())
        with open(os.path.join(self.dir, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {"total_size": 9 * 80}, "weight_map": weight_map}, f)
        got = dump(self.dir)
        self.assertEqual(got["shards"], 3)
        self.check_dump(got, expected)

    def test_truncated_file_is_an_error_not_a_crash(self):
        path = os.path.join(self.dir, "cut.safetensors")
        safetensors.numpy.save_file({"w": np.ones((8, 8), np.float32)}, path)
        with open(path, "rb") as f:
            data = f.read()
        with open(path, "wb") as f:
            f.write(data[:-1])
        proc = run_tool("dump", path, check=False)
        self.assertEqual(proc.returncode, 1)
        self.assertIn("DATA_LOSS", proc.stderr)
        self.assertIn("tensor 'w'", proc.stderr)


class EngineWritesReferenceReads(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="st_interop_")
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.rng = np.random.default_rng(99)
        self.spec_path = os.path.join(self.dir, "spec.json")

    def write_spec(self, tensors, metadata):
        spec = {"metadata": metadata, "tensors": {
            name: {"dtype": dtype, "shape": list(shape), "hex": bytes(raw).hex()}
            for name, (dtype, shape, raw) in tensors.items()}}
        with open(self.spec_path, "w") as f:
            json.dump(spec, f)

    def test_numpy_dtypes_and_shapes(self):
        arrays, spec = {}, {}
        for dtype_name, dtype in NUMPY_DTYPES.items():
            for i, shape in enumerate(SHAPES):
                name = "%s.%d" % (dtype_name.lower(), i)
                arrays[name] = random_array(self.rng, dtype, shape)
                spec[name] = (dtype_name, shape, arrays[name].tobytes())
        metadata = {"format": "pt", "note": "unicode ✓"}
        self.write_spec(spec, metadata)
        out = os.path.join(self.dir, "ours.safetensors")
        run_tool("write", self.spec_path, out)

        loaded = safetensors.numpy.load_file(out)
        self.assertEqual(sorted(loaded), sorted(arrays))
        for name, array in arrays.items():
            self.assertEqual(loaded[name].dtype, array.dtype, name)
            self.assertEqual(loaded[name].shape, array.shape, name)
            self.assertEqual(loaded[name].tobytes(), array.tobytes(), name)
        with safetensors.safe_open(out, framework="np") as f:
            self.assertEqual(f.metadata(), metadata)
        with open(out, "rb") as f:
            header_len = int.from_bytes(f.read(8), "little")
        self.assertEqual(header_len % 8, 0)

    def test_raw_bf16_and_fp8(self):
        spec = {}
        for dtype_name, (_, size) in RAW_DTYPES.items():
            for i, shape in enumerate(SHAPES):
                raw = self.rng.bytes(int(np.prod(shape, dtype=np.int64)) * size)
                spec["%s.%d" % (dtype_name.lower(), i)] = (dtype_name, shape, raw)
        self.write_spec(spec, {})
        out = os.path.join(self.dir, "raw.safetensors")
        run_tool("write", self.spec_path, out)
        with open(out, "rb") as f:
            loaded = dict(safetensors.deserialize(f.read()))
        self.assertEqual(sorted(loaded), sorted(spec))
        for name, (dtype_name, shape, raw) in spec.items():
            self.assertEqual(loaded[name]["dtype"], dtype_name, name)
            self.assertEqual(tuple(loaded[name]["shape"]), tuple(shape), name)
            self.assertEqual(bytes(loaded[name]["data"]), raw, name)

    def test_sharded_checkpoint(self):
        arrays = {"t%02d" % i: random_array(self.rng, np.float32, (16, 4 + i)) for i in range(10)}
        self.write_spec({n: ("F32", a.shape, a.tobytes()) for n, a in arrays.items()}, {"format": "pt"})
        out = os.path.join(self.dir, "ckpt")
        run_tool("write-checkpoint", self.spec_path, out, "1000")
        with open(os.path.join(out, "model.safetensors.index.json")) as f:
            index = json.load(f)
        self.assertEqual(sorted(index["weight_map"]), sorted(arrays))
        self.assertEqual(index["metadata"]["total_size"], sum(a.nbytes for a in arrays.values()))
        shards = sorted(set(index["weight_map"].values()))
        self.assertGreater(len(shards), 1)
        seen = {}
        for shard in shards:
            loaded = safetensors.numpy.load_file(os.path.join(out, shard))
            for name, array in loaded.items():
                self.assertEqual(index["weight_map"][name], shard)
                seen[name] = array
        self.assertEqual(sorted(seen), sorted(arrays))
        for name, array in arrays.items():
            self.assertEqual(seen[name].tobytes(), array.tobytes(), name)
        self.assertEqual(dump(out)["shards"], len(shards))


if __name__ == "__main__":
    if not TOOL or not os.access(TOOL, os.X_OK):
        sys.exit("set SAFETENSORS_TOOL to the safetensors_tool binary")
    unittest.main(verbosity=2)
