#!/usr/bin/env python3
"""The C++ engine's forward pass (engine/model/, tool `model_logits`) against the float64 reference.

For each tiny checkpoint (dsv3, dsv3_noq, glm; make_tiny_checkpoint.py) and the prompts of
prompts.json: a varlen prefill of all prompts, then 32 batched decode steps, teacher-forced with the
tokens reference_model.py fed (so every step compares logits for the same context). Measured per
logit row: rel = max|engine - ref| / max|ref|; top-1 agreement.

  - BF16 path (checkpoint BF16 weights, BF16 KV pages) vs a reference that rounds the cached MLA
    latent to BF16 the way the page pool stores it: the same computation, so it must agree to float32
    rounding (ENGINE_RTOL) with 100% top-1. This is the check that catches engine mistakes. Known
    knife-edge: dsv3 decode row 70, where the float64 and BF16-KV references are 0.53 apart (a routing
    choice the cache's rounding flips); a change of the engine's last bits in attention can move it
    to the float64 side (seen once while the decode blocks depended on the page size).
  - BF16 path vs the pure float64 reference (the issue's bound, 1e-2): the median row is within 1e-2;
    the BF16 rounding of the cache can flip a near-tied MoE routing choice (gaps down to 6e-5 in these
    random models) or a DSA top-k choice (gaps down to 3.7e-4) and move a row far more. Every row
    beyond 1e-2 must be one where the BF16-KV reference moves as well (the cache's rounding, not the
    engine); each is printed with its top-1 agreement and the reference's top-1 margin.
  - Chunked prefill over small pages (chunks of 5, 3-token pages) equals the one-step prefill.
  - FP8 e4m3 KV pages, INT4 routed experts and FP8 weights, each against the reference fed the same
    rounding (per-layer FP8 KV scale from the prefill batch; QuantizeInt4Group32Ref /
    QuantizeFp8Block128Ref rules re-implemented in numpy): QUANT_RTOL, 100% top-1.
  - Reported (loose bounds only): the same three vs the plain float64 reference as
    KL(ref || engine) of the softmax and top-1 agreement: what the formats cost on these models.

Run: MODEL_LOGITS_TOOL=build/engine/model_logits .venv/bin/python tests/reference/test_engine_vs_reference.py
(CTest passes the tool's path: `ctest -R reference.engine`.)
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

try:
    import numpy as np
    from safetensors.numpy import load_file
except ImportError as e:  # pragma: no cover - depends on the interpreter
    print("SKIP: numpy/safetensors missing (%s); run scripts/install-deps.sh" % e)
    sys.exit(0)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import make_tiny_checkpoint  # noqa: E402
import reference_model as rm  # noqa: E402

TOOL = os.environ.get("MODEL_LOGITS_TOOL", "")
VARIANTS = sorted(make_tiny_checkpoint.VARIANTS)
STEPS = 32
ISSUE_RTOL = 1e-2   # the issue's bound for the BF16 path
ENGINE_RTOL = 1e-3  # engine vs the BF16-KV reference: measured <= 6.3e-4 (fp32 sums, FMA, vs float64)
# Same-format references for FP8 KV, INT4 experts, FP8 weights: measured <= 1.4e-3. INT4 GEMV rounds
# activations to int16 (~2e-5 per matmul), and wherever the float32 engine and the float64 reference
# land on different sides of a BF16 rounding boundary of a cached latent value, every later row of
# that sequence moves by up to ~1e-3 (with an FP8 cache, whose steps absorb it: <= 1.2e-6).
QUANT_RTOL = 5e-3
CHUNK_RTOL = 1e-3   # chunked vs one-step prefill: same math, other summation order (measured <= 3.9e-4)


def bf16_round(x):
    """float64 -> nearest BF16 value (round to nearest even), as float64."""
    b = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    b = ((b + 0x7FFF + ((b >> 16) & 1)) >> 16) << 16
    return b.astype(np.uint32).view(np.float32).astype(np.float64)


def e4m3_round(x):
    """float32 -> nearest FP8 e4m3 value (ties to even, subnormals, saturating at 448), as float32."""
    x = np.asarray(x, np.float64)
    a = np.minimum(np.abs(x), 448.0)
    e = np.floor(np.log2(np.maximum(a, 2.0 ** -6)))
    q = 2.0 ** (e - 3)  # 3 mantissa bits; below 2^-6 the subnormal step 2^-9
    return (np.sign(x) * np.round(a / q) * q).astype(np.float32)


def bf16_f32(x):
    return bf16_round(x).astype(np.float32)


def int4_group32(w):
    """w [N, K] (bf16 values) -> dequantized INT4 group-32 weights, QuantizeInt4Group32Ref's rules:
    scale = bf16(max|w| / 7.5) per 32 inputs (2^-7 if 0), q = rint(clamp(bf16(w / scale), -8, 7))."""
    n, k = w.shape
    g = w.astype(np.float32).reshape(n, k // 32, 32)
    scale = bf16_f32(np.abs(g).max(-1, keepdims=True) / np.float32(7.5))
    scale[scale == 0] = np.float32(2.0 ** -7)
    q = np.rint(np.clip(bf16_f32(g / scale), -8, 7))
    return (q * scale).reshape(n, k).astype(np.float64)


def fp8_block128(w):
    """w [N, K] -> dequantized FP8 e4m3 with one scale per 128x128 block (QuantizeFp8Block128Ref):
    scale_inv = max(max|block|, 1e-4) / 448, data = e4m3(w / scale_inv)."""
    out = np.empty_like(w)
    for r in range(0, w.shape[0], 128):
        for c in range(0, w.shape[1], 128):
            b = w[r:r + 128, c:c + 128].astype(np.float32)
            scale_inv = np.maximum(np.abs(b).max(), np.float32(1e-4)) / np.float32(448)
            out[r:r + 128, c:c + 128] = e4m3_round(b / scale_inv) * scale_inv
    return out


_EXPERT = re.compile(r"model\.layers\.\d+\.mlp\.experts\.\d+\.(gate|up|down)_proj\.weight$")
_FP8 = re.compile(r"model\.layers\.\d+\.(self_attn\.(q_proj|q_a_proj|q_b_proj|kv_a_proj_with_mqa|kv_b_proj|o_proj)"
                  r"|mlp(\.shared_experts|\.experts\.\d+)?\.(gate|up|down)_proj)\.weight$")


def requantized(weights, kind):
    """The checkpoint as model_logits --weights int4|fp8 re-quantizes it: routed experts to INT4, or
    every Linear but lm_head (and the DSA indexer) to FP8."""
    pattern, quantize = (_EXPERT, int4_group32) if kind == "int4" else (_FP8, fp8_block128)
    return {k: quantize(v) if pattern.match(k) else v for k, v in weights.items()}


class Bf16KvModel(rm.Model):
    """The reference with its cached latent (normed c and roped k_r) and its DSA indexer keys rounded
    to BF16 as they enter the cache (the page pool holds both); everything else float64."""

    def store(self, layer, x):
        """What reading back a latent value written to the cache gives."""
        return bf16_round(x)

    def store_index_keys(self, k):
        return bf16_round(k)

    def attention(self, layer, h, segs, layer_caches, absorbed):
        a = "model.layers.%d.self_attn." % layer
        kv_norm, rope, plain_rms = self.w[a + "kv_a_layernorm.weight"], self.rope, rm.rms_norm
        plain_apply = rope.apply
        in_indexer = [False]
        self.calibrate(layer, h, segs)

        def rms_norm(x, w, eps):
            y = plain_rms(x, w, eps)
            return self.store(layer, y) if w is kv_norm else y

        def apply(x, pos):  # the MLA key's rope part is the only 2-D input outside the indexer
            y = plain_apply(x, pos)
            return self.store(layer, y) if x.ndim == 2 and not in_indexer[0] else y

        plain_select = self.index_select

        def index_select(*args):
            in_indexer[0] = True
            try:
                return plain_select(*args)
            finally:
                in_indexer[0] = False

        rm.rms_norm, rope.apply, self.index_select = rms_norm, apply, index_select
        try:
            return super().attention(layer, h, segs, layer_caches, absorbed)
        finally:
            rm.rms_norm, self.index_select = plain_rms, plain_select
            del rope.apply

    def calibrate(self, layer, h, segs):
        pass


class Fp8KvModel(Bf16KvModel):
    """The cache as an FP8 e4m3 page pool holds it: per layer one scale, max|bf16 latent| / 448 over the
    first batch written (the whole prefill), stored e4m3(bf16(x) / scale), read back code * scale in float32
    (the attention kernels read the codes in place and fold the scale in; nothing is rounded to BF16).
    DSA indexer keys: one fp32 scale per token row, s = max|k| / 448 (1 for a zero row), stored
    e4m3(k * (1 / s)) from the float32 keys, read back code * s in float32 (PagePool::WriteIndexKeys)."""

    def store_index_keys(self, k):
        k = np.asarray(k, np.float32)
        amax = np.abs(k).max(-1, keepdims=True)
        scale = np.where(amax > 0, amax / np.float32(448.0), np.float32(1.0)).astype(np.float32)
        codes = e4m3_round(k * (np.float32(1.0) / scale))
        return (codes * scale).astype(np.float64)

    scales = None

    def calibrate(self, layer, h, segs):
        if self.scales is None:
            self.scales = {}
        if layer in self.scales:
            return
        a = "model.layers.%d.self_attn." % layer
        kv = h @ self.w[a + "kv_a_proj_with_mqa.weight"].T
        c = rm.rms_norm(kv[:, :self.kv_lora], self.w[a + "kv_a_layernorm.weight"], 1e-6)
        kr = np.concatenate([self.rope.apply(kv[start:start + n, self.kv_lora:], pos) for start, n, pos in segs])
        amax = max(np.abs(bf16_round(c)).max(), np.abs(bf16_round(kr)).max())
        self.scales[layer] = np.float32(amax) / np.float32(448.0)

    def store(self, layer, x):
        scale = self.scales[layer]
        codes = e4m3_round(bf16_round(x).astype(np.float32) * (np.float32(1.0) / scale))
        return (codes * scale).astype(np.float64)


def teacher_forced(model, prompts, decode_tokens):
    caches = [model.new_cache() for _ in prompts]
    prefill = model.forward(prompts, caches, absorbed=False)
    decode = [model.forward([[int(t)] for t in step], caches, absorbed=True) for step in decode_tokens]
    return prefill, np.array(decode)


def rows(x):
    return x.reshape(-1, x.shape[-1]).astype(np.float64)


def row_rel(a, ref):
    a, ref = rows(a), rows(ref)
    return np.abs(a - ref).max(-1) / np.abs(ref).max(-1)


def kl(ref, a):
    """KL(softmax(ref) || softmax(a)) per row."""
    def log_softmax(x):
        x = rows(x)
        x = x - x.max(-1, keepdims=True)
        return x - np.log(np.exp(x).sum(-1, keepdims=True))
    lp, lq = log_softmax(ref), log_softmax(a)
    return (np.exp(lp) * (lp - lq)).sum(-1)


def top1(a, ref):
    return rows(a).argmax(-1) == rows(ref).argmax(-1)


@unittest.skipUnless(TOOL and os.path.exists(TOOL), "MODEL_LOGITS_TOOL not set (ctest passes it)")
class EngineVsReference(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="tandem_engine_ref_")
        with open(os.path.join(HERE, "prompts.json")) as f:
            cls.prompts = json.load(f)["prompts"]
        cls.ref, cls.bf16kv, cls.fp8kv, cls.int4, cls.fp8w, cls.runs = {}, {}, {}, {}, {}, {}
        for v in VARIANTS:
            ck = os.path.join(cls.dir, v)
            make_tiny_checkpoint.write_variant(ck, v)
            cfg, w = rm.load_checkpoint(ck)
            cls.ref[v] = rm.generate(rm.Model(cfg, w), cls.prompts, STEPS, check_forms=False)
            cls.bf16kv[v] = teacher_forced(Bf16KvModel(cfg, w), cls.prompts, cls.ref[v]["decode_tokens"])
            cls.fp8kv[v] = teacher_forced(Fp8KvModel(cfg, w), cls.prompts, cls.ref[v]["decode_tokens"])
            cls.int4[v] = teacher_forced(Bf16KvModel(cfg, requantized(w, "int4")), cls.prompts,
                                         cls.ref[v]["decode_tokens"])
            cls.fp8w[v] = teacher_forced(Bf16KvModel(cfg, requantized(w, "fp8")), cls.prompts,
                                         cls.ref[v]["decode_tokens"])
            tokens = os.path.join(cls.dir, v + "_decode_tokens.json")
            with open(tokens, "w") as f:
                json.dump(cls.ref[v]["decode_tokens"].tolist(), f)
            for run, flags in {"bf16": [], "chunked": ["--chunk", "5", "--page-tokens", "3"],
                               "fp8_kv": ["--kv", "fp8"], "int4": ["--weights", "int4"],
                               "fp8_weights": ["--weights", "fp8"]}.items():
                out = os.path.join(cls.dir, "%s_%s.safetensors" % (v, run))
                subprocess.run([TOOL, "--checkpoint", ck, "--prompts", os.path.join(HERE, "prompts.json"),
                                "--decode-tokens", tokens, "--out", out] + flags, check=True)
                cls.runs[v, run] = load_file(out)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def engine(self, v, run):
        e = self.runs[v, run]
        return e["prefill_logits"], e["decode_logits"]

    def test_bf16_path_equals_bf16_kv_reference(self):
        for v in VARIANTS:
            for name, got, want in zip(("prefill", "decode"), self.engine(v, "bf16"), self.bf16kv[v]):
                rel = row_rel(got, want)
                print("%-8s %-7s engine vs BF16-KV reference: max rel %.2e, top-1 %d/%d"
                      % (v, name, rel.max(), top1(got, want).sum(), len(rel)))
                self.assertLessEqual(rel.max(), ENGINE_RTOL, (v, name))
                self.assertTrue(top1(got, want).all(), (v, name))

    def test_quantized_paths_equal_quantized_references(self):
        """FP8 KV pages, INT4 experts and FP8 weights, each against the reference fed the same rounding."""
        for run, refs in (("fp8_kv", self.fp8kv), ("int4", self.int4), ("fp8_weights", self.fp8w)):
            for v in VARIANTS:
                for name, got, want in zip(("prefill", "decode"), self.engine(v, run), refs[v]):
                    rel, agree = row_rel(got, want), top1(got, want)
                    print("%-8s %-7s engine %-11s vs the same-format reference: max rel %.2e, top-1 %d/%d"
                          % (v, name, run, rel.max(), agree.sum(), len(rel)))
                    self.assertLessEqual(rel.max(), QUANT_RTOL, (v, run, name))
                    self.assertTrue(agree.all(), (v, run, name))

    def test_bf16_path_vs_float64_reference(self):
        for v in VARIANTS:
            ref = self.ref[v]
            for name, got, kv, want, margin in zip(
                    ("prefill", "decode"), self.engine(v, "bf16"), self.bf16kv[v],
                    (ref["prefill_logits"], ref["decode_logits"]),
                    (ref["prefill_top1_margin"], ref["decode_top1_margin"])):
                rel, kv_rel, agree = row_rel(got, want), row_rel(kv, want), top1(got, want)
                print("%-8s %-7s engine vs float64: max rel %.2e, median %.2e, rows <= 1e-2: %d/%d, top-1 %d/%d"
                      % (v, name, rel.max(), np.median(rel), (rel <= ISSUE_RTOL).sum(), len(rel),
                         agree.sum(), len(agree)))
                for r in np.flatnonzero((rel > ISSUE_RTOL) | ~agree):
                    print("    row %3d: rel %.2e (BF16-KV reference itself: %.2e), top-1 %s, ref margin %.1e"
                          % (r, rel[r], kv_rel[r], "agrees" if agree[r] else "differs", margin.reshape(-1)[r]))
                # A row beyond the bound must be the cache rounding's doing: the BF16-KV reference moves too.
                far = rel > ISSUE_RTOL
                self.assertTrue(np.all(kv_rel[far] > ISSUE_RTOL / 2), (v, name, rel[far], kv_rel[far]))
                self.assertLessEqual(np.median(rel), ISSUE_RTOL, (v, name))
                # A top-1 flip needs a small margin or a row the cache rounding moved.
                flips = ~agree
                self.assertTrue(np.all((margin.reshape(-1)[flips] < 2 * rel[flips]) | far[flips]), (v, name))

    def test_chunked_prefill_over_small_pages_equals_one_step(self):
        for v in VARIANTS:
            for name, chunked, whole in zip(("prefill", "decode"), self.engine(v, "chunked"), self.engine(v, "bf16")):
                rel = row_rel(chunked, whole)
                self.assertLessEqual(rel.max(), CHUNK_RTOL, (v, name))

    def test_report_fp8_kv_and_int4_deviation(self):
        print("\n%-8s %-12s %-7s %10s %10s %8s" % ("variant", "run", "phase", "mean KL", "max KL", "top-1"))
        for v in VARIANTS:
            ref = self.ref[v]
            for run in ("bf16", "fp8_kv", "int4", "fp8_weights"):
                for name, got, want in zip(("prefill", "decode"), self.engine(v, run),
                                           (ref["prefill_logits"], ref["decode_logits"])):
                    d, agree = kl(want, got), top1(got, want)
                    print("%-8s %-12s %-7s %10.2e %10.2e %7.1f%%" % (v, run, name, d.mean(), d.max(), 100 * agree.mean()))
                    # Loose: these random tiny models flip routing and DSA choices easily (measured mean
                    # KL up to 0.22, top-1 down to 51%); a broken path gives mean KL of O(1) and more.
                    self.assertLess(d.mean(), 0.5, (v, run, name))
                    self.assertGreaterEqual(agree.mean(), 0.4, (v, run, name))


if __name__ == "__main__":
    unittest.main()
