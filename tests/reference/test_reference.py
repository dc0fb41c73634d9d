#!/usr/bin/env python3
"""The float64 numpy reference against Hugging Face transformers' goldens (tests/reference/goldens/).

For each tiny checkpoint (deepseek_v3, deepseek_v3 without q_lora, glm_moe_dsa):
  - regenerating it reproduces the bytes the goldens were made from (sha256 in the golden's meta),
    and the `safetensors` package reads it;
  - prefill logits at every position and 32 greedy decode steps agree with HF float32 within
    LOGIT_RTOL (max over rows of max|ref - hf| / max|hf|), with the same greedy token at every step;
  - decode's absorbed MLA equals the expanded form, a varlen batch equals the prompts run alone;
  - GLM: contexts within index_topk are exactly dense, longer ones attend to exactly index_topk keys,
    and ignoring the indexer there moves the logits far from HF's (so the goldens are sparse).

Run: .venv/bin/python tests/reference/test_reference.py   (CTest: ctest -R reference)
"""
import hashlib
import json
import os
import shutil
import sys
import tempfile
import unittest

import numpy as np
from safetensors import safe_open

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import make_tiny_checkpoint  # noqa: E402
import reference_model  # noqa: E402

# float32 HF vs float64 here: measured <= 2.1e-6, the same size as HF's own float32-vs-float64 gap
# (2.6e-6). 1e-5 leaves ~4x headroom; structural mistakes (a softmax or RoPE scale, routing rule,
# YaRN ramp) measure 1.3-1.9, an RMSNorm eps 10x off 1e-5-1.2e-4 (docs/reference-check.md).
LOGIT_RTOL = 1e-5
FORM_RTOL = 1e-12  # two float64 evaluations of the same sum in a different order
VARIANTS = sorted(make_tiny_checkpoint.VARIANTS)


def row_rel(a, b):
    return float(np.max(np.abs(a - b).max(-1) / np.abs(b).max(-1)))


def load_golden(variant):
    g = dict(np.load(os.path.join(HERE, "goldens", variant + ".npz")))
    g["meta"] = json.loads(str(g["meta"]))
    return g


def prompts_of(golden):
    off, toks = golden["prompt_offsets"], golden["prompt_tokens"]
    return [toks[off[i]:off[i + 1]].tolist() for i in range(len(off) - 1)]


class ReferenceVsHuggingFace(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="tandem_ref_")
        cls.digests, cls.models, cls.goldens, cls.results = {}, {}, {}, {}
        for v in VARIANTS:
            cls.digests[v] = make_tiny_checkpoint.write_variant(os.path.join(cls.dir, v), v)
            cls.goldens[v] = load_golden(v)
            cfg, weights = reference_model.load_checkpoint(os.path.join(cls.dir, v))
            cls.models[v] = reference_model.Model(cfg, weights)
            cls.results[v] = reference_model.generate(cls.models[v], prompts_of(cls.goldens[v]),
                                                      cls.goldens[v]["meta"]["decode_steps"])

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, True)

    def test_checkpoints_are_the_golden_ones(self):
        for v in VARIANTS:
            with self.subTest(variant=v):
                self.assertEqual(self.digests[v], self.goldens[v]["meta"]["checkpoint_sha256"])
                path = os.path.join(self.dir, v, "model.safetensors")
                with safe_open(path, framework="np") as f:
                    names = set(f.keys())
                expected = {n for n, _, _ in make_tiny_checkpoint.tensor_specs(make_tiny_checkpoint.VARIANTS[v])}
                self.assertEqual(names, expected)
                self.assertLess(os.path.getsize(path), 2 << 20)

    def test_logits_match_hf(self):
        for v in VARIANTS:
            with self.subTest(variant=v):
                g, r = self.goldens[v], self.results[v]
                np.testing.assert_array_equal(r["prompt_offsets"], g["prompt_offsets"])
                pre = row_rel(r["prefill_logits"], g["prefill_logits"].astype(np.float64))
                dec = row_rel(r["decode_logits"], g["decode_logits"].astype(np.float64))
                print("\n%s: prefill rel err %.2e, decode rel err %.2e (HF %s, torch %s)"
                      % (v, pre, dec, g["meta"]["transformers"], g["meta"]["torch"]), file=sys.stderr)
                self.assertLessEqual(pre, LOGIT_RTOL)
                self.assertLessEqual(dec, LOGIT_RTOL)

    def test_top1_agrees_on_every_step(self):
        for v in VARIANTS:
            with self.subTest(variant=v):
                g, r = self.goldens[v], self.results[v]
                np.testing.assert_array_equal(r["decode_tokens"], g["decode_tokens"])
                np.testing.assert_array_equal(r["decode_logits"].argmax(-1), g["decode_logits"].argmax(-1))
                np.testing.assert_array_equal(r["prefill_logits"].argmax(-1), g["prefill_logits"].argmax(-1))

    def test_absorbed_decode_equals_expanded(self):
        for v in VARIANTS:
            with self.subTest(variant=v):
                self.assertLessEqual(self.models[v].stats["mla_form_max_rel_diff"], FORM_RTOL)

    def test_absorbed_prefill_equals_expanded(self):
        m = self.models["glm"]
        prompts = prompts_of(self.goldens["glm"])
        absorbed = m.forward(prompts, [m.new_cache() for _ in prompts], absorbed=True)
        expanded = m.forward(prompts, [m.new_cache() for _ in prompts], absorbed=False)
        self.assertLessEqual(row_rel(absorbed, expanded), FORM_RTOL)

    def test_varlen_batch_equals_single_prompts(self):
        for v in VARIANTS:
            with self.subTest(variant=v):
                m, prompts = self.models[v], prompts_of(self.goldens[v])
                batched = self.results[v]
                for i, p in enumerate(prompts):
                    alone = reference_model.generate(m, [p], 4)
                    lo, hi = batched["prompt_offsets"][i:i + 2]
                    self.assertLessEqual(row_rel(alone["prefill_logits"], batched["prefill_logits"][lo:hi]), FORM_RTOL)
                    self.assertLessEqual(row_rel(alone["decode_logits"][:, 0], batched["decode_logits"][:4, i]),
                                         FORM_RTOL)


class DsaSwitch(unittest.TestCase):
    """GLM's indexer: dense within index_topk, exactly index_topk keys beyond it."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="tandem_dsa_")
        self.addCleanup(shutil.rmtree, self.dir, True)
        make_tiny_checkpoint.write_variant(self.dir, "glm")
        self.model = reference_model.Model(*reference_model.load_checkpoint(self.dir))
        self.golden = load_golden("glm")
        self.prompts = prompts_of(self.golden)
        self.topk = self.model.cfg["index_topk"]

    def prefill(self, use_indexer):
        self.model.use_indexer = use_indexer
        return self.model.forward(self.prompts, [self.model.new_cache() for _ in self.prompts], absorbed=False)

    def test_selects_min_of_context_and_topk(self):
        counts = []
        real = self.model.index_select

        def spy(*args):
            allowed = real(*args)
            counts.append((args[3], allowed.sum(axis=1)))
            return allowed

        self.model.index_select = spy
        self.prefill(True)
        self.assertTrue(counts)
        for pos, n in counts:
            np.testing.assert_array_equal(n, np.minimum(pos + 1, self.topk))
        self.assertGreater(self.model.stats["sparse_queries"], 0)

    def test_dense_within_topk_sparse_beyond(self):
        sparse, dense = self.prefill(True), self.prefill(False)
        hf = self.golden["prefill_logits"].astype(np.float64)
        off = self.golden["prompt_offsets"]
        for i, p in enumerate(self.prompts):
            rows = slice(off[i], off[i + 1])
            within = slice(off[i], off[i] + min(len(p), self.topk))  # positions < index_topk
            self.assertLessEqual(row_rel(sparse[within], dense[within]), FORM_RTOL)
            if len(p) > self.topk:
                beyond = slice(off[i] + self.topk, off[i + 1])
                self.assertLessEqual(row_rel(sparse[rows], hf[rows]), LOGIT_RTOL)
                self.assertGreater(row_rel(dense[beyond], hf[beyond]), 100 * LOGIT_RTOL)


class CheckpointFormat(unittest.TestCase):
    def test_bf16_rounds_to_nearest_even(self):
        x = np.array([1.0, 1.0 + 2 ** -8, 1.0 + 3 * 2 ** -8, -2.5, 1.0 + 2 ** -9], np.float32)
        bits = make_tiny_checkpoint.to_bf16_bits(x).astype(np.uint32) << 16
        np.testing.assert_array_equal(bits.view(np.float32), [1.0, 1.0, 1.0 + 2 ** -6, -2.5, 1.0])

    def test_sharded_checkpoint_loads_the_same(self):
        d = tempfile.mkdtemp(prefix="tandem_shard_")
        self.addCleanup(shutil.rmtree, d, True)
        cfg = make_tiny_checkpoint.VARIANTS["glm"]
        tensors = make_tiny_checkpoint.make_tensors(cfg)
        names = sorted(tensors)
        shards = {"model-00001-of-00002.safetensors": names[::2], "model-00002-of-00002.safetensors": names[1::2]}
        weight_map = {}
        for shard, part in shards.items():
            with open(os.path.join(d, shard), "wb") as f:
                f.write(make_tiny_checkpoint.safetensors_bytes({n: tensors[n] for n in part}, {"format": "pt"}))
            weight_map.update({n: shard for n in part})
        with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {}, "weight_map": weight_map}, f)
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(make_tiny_checkpoint.hf_config(cfg), f)
        single = os.path.join(d, "single")
        make_tiny_checkpoint.write_variant(single, "glm")
        _, sharded_w = reference_model.load_checkpoint(d)
        _, single_w = reference_model.load_checkpoint(single)
        self.assertEqual(sorted(sharded_w), sorted(single_w))
        for n in single_w:
            np.testing.assert_array_equal(sharded_w[n], single_w[n], n)


class Cli(unittest.TestCase):
    def test_writes_documented_npz(self):
        d = tempfile.mkdtemp(prefix="tandem_cli_")
        self.addCleanup(shutil.rmtree, d, True)
        make_tiny_checkpoint.write_variant(os.path.join(d, "ck"), "dsv3")
        out = os.path.join(d, "ref.npz")
        rc = reference_model.main(["--checkpoint", os.path.join(d, "ck"), "--prompts",
                                   os.path.join(HERE, "prompts.json"), "--decode-steps", "3", "--out", out])
        self.assertEqual(rc, 0)
        r = np.load(out)
        n_prompts = len(load_golden("dsv3")["prompt_offsets"]) - 1
        self.assertEqual(r["decode_logits"].shape, (3, n_prompts, 256))
        self.assertEqual(r["decode_tokens"].shape, (3, n_prompts))
        self.assertEqual(r["prefill_logits"].shape, (r["prompt_offsets"][-1], 256))
        self.assertEqual(r["prefill_logits"].dtype, np.float64)


if __name__ == "__main__":
    unittest.main()
