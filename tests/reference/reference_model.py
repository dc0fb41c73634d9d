#!/usr/bin/env python3
"""Float64 numpy reference forward pass for `deepseek_v3` (Kimi K2.x) and `glm_moe_dsa` (GLM 5.x).

Written from the architectures' definitions (transformers' modeling_deepseek_v3.py and
modeling_glm_moe_dsa.py), independently of that code. Everything is float64 from the BF16/F32
checkpoint values on. What it computes, per layer:
  RMSNorm -> MLA attention (+ GLM's DSA indexer) -> residual -> RMSNorm -> dense MLP or MoE -> residual
  - YaRN RoPE on the rope slice, pairs (2i, 2i+1) rotated (interleaved layout), cos/sin scaled by the
    YaRN attention factor mscale(factor, mscale) / mscale(factor, mscale_all_dim); the softmax scale is
    qk_head_dim^-0.5 * mscale(factor, mscale_all_dim)^2.
  - MLA prefill in the expanded form (per-head keys/values from kv_b_proj); decode in the absorbed
    form over the [kv_lora_rank + rope]-wide latent (576 in the real models). With check_forms=True
    decode also runs the expanded form and records the largest disagreement.
  - MoE: sigmoid scores; score + e_score_correction_bias only chooses experts: groups ranked by the
    sum of their two best biased scores, the best topk_group groups kept, top-k experts among them;
    gates are the unbiased scores, normalised (norm_topk_prob) and times routed_scaling_factor;
    plus the shared experts.
  - DSA indexer (GLM): index score(q, t) = sum_h w_h(x) * relu(q_h . k_t * d^-0.5), w = weights_proj(x)
    * H^-0.5; each query attends only to the index_topk best causal keys (all of them when the
    context is <= index_topk).
Batches are varlen: sequences of different lengths packed token by token, each with its own KV cache.

CLI (the entry point for the C++ engine check; format in docs/reference-check.md):
  reference_model.py --checkpoint DIR --prompts FILE.json --decode-steps N --out FILE.npz
Needs numpy only (the pinned .venv of scripts/requirements-test.txt).
"""
import argparse
import json
import math
import os
import struct
import sys

import numpy as np

_DTYPES = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "I64": "<i8", "I32": "<i4"}


def load_safetensors(path):
    """name -> float64 array. Parses the file directly so that BF16 needs no torch."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    base, out = 8 + n, {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        lo, hi = t["data_offsets"]
        raw = data[base + lo:base + hi]
        if t["dtype"] == "BF16":
            bits = np.frombuffer(raw, "<u2").astype(np.uint32) << 16
            arr = bits.view(np.float32)
        elif t["dtype"] in _DTYPES:
            arr = np.frombuffer(raw, _DTYPES[t["dtype"]])
        else:
            raise ValueError("%s: dtype %s not supported by the reference" % (name, t["dtype"]))
        out[name] = arr.astype(np.float64).reshape(t["shape"])
    return out


def load_checkpoint(ckpt_dir):
    with open(os.path.join(ckpt_dir, "config.json")) as f:
        cfg = json.load(f)
    index = os.path.join(ckpt_dir, "model.safetensors.index.json")
    weights = {}
    if os.path.exists(index):
        with open(index) as f:
            shards = sorted(set(json.load(f)["weight_map"].values()))
        for shard in shards:
            weights.update(load_safetensors(os.path.join(ckpt_dir, shard)))
    else:
        weights = load_safetensors(os.path.join(ckpt_dir, "model.safetensors"))
    return cfg, weights


# ---------------------------------------------------------------------------------------------- math

def rms_norm(x, w, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def layer_norm(x, w, b, eps):
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


def silu(x):
    return x / (1.0 + np.exp(-x))


def softmax(x, axis=-1):
    m = np.max(x, axis=axis, keepdims=True)
    e = np.exp(x - m)
    return e / e.sum(axis=axis, keepdims=True)


def yarn_mscale(scale, mscale):
    return 1.0 if scale <= 1 else 0.1 * mscale * math.log(scale) + 1.0


class Rope:
    """YaRN (or plain) RoPE over `dim` rotary dims: inverse frequencies, cos/sin factor, softmax factor."""

    def __init__(self, cfg, dim):
        base = cfg.get("rope_theta", 10000.0)
        rs = cfg.get("rope_scaling") or cfg.get("rope_parameters") or {}
        kind = rs.get("rope_type", rs.get("type", "default"))
        inv = 1.0 / base ** (np.arange(0, dim, 2, dtype=np.float64) / dim)
        self.cos_sin_factor, self.softmax_factor = 1.0, 1.0
        if kind == "yarn":
            factor = rs["factor"]
            orig = rs.get("original_max_position_embeddings", cfg["max_position_embeddings"])
            beta_fast, beta_slow = rs.get("beta_fast") or 32, rs.get("beta_slow") or 1

            def corr_dim(rot):  # rotary dim whose wavelength makes `rot` turns over `orig` positions
                return dim * math.log(orig / (rot * 2 * math.pi)) / (2 * math.log(base))

            low, high = corr_dim(beta_fast), corr_dim(beta_slow)
            if rs.get("truncate", True):
                low, high = math.floor(low), math.ceil(high)
            low, high = max(low, 0), min(high, dim - 1)
            if low == high:
                high += 0.001
            ramp = np.clip((np.arange(dim // 2, dtype=np.float64) - low) / (high - low), 0, 1)
            # ramp 0: keep the original frequency (extrapolate); ramp 1: divide it by factor.
            inv = inv / factor * ramp + inv * (1 - ramp)
            mscale, mscale_all = rs.get("mscale"), rs.get("mscale_all_dim")
            if rs.get("attention_factor") is not None:
                self.cos_sin_factor = rs["attention_factor"]
            elif mscale and mscale_all:
                self.cos_sin_factor = yarn_mscale(factor, mscale) / yarn_mscale(factor, mscale_all)
            else:
                self.cos_sin_factor = yarn_mscale(factor, 1.0)
            if mscale_all:
                self.softmax_factor = yarn_mscale(factor, mscale_all) ** 2
        elif kind != "default":
            raise ValueError("rope_scaling type %r not supported" % kind)
        self.inv_freq = inv

    def apply(self, x, pos):
        """x [T, ..., dim], pos [T]: rotates pairs (2i, 2i+1) by pos * inv_freq[i]."""
        ang = pos[:, None] * self.inv_freq[None, :]  # [T, dim/2]
        cos, sin = np.cos(ang) * self.cos_sin_factor, np.sin(ang) * self.cos_sin_factor
        shape = (len(pos),) + (1,) * (x.ndim - 2) + (cos.shape[-1],)
        cos, sin = cos.reshape(shape), sin.reshape(shape)
        even, odd = x[..., 0::2], x[..., 1::2]
        out = np.empty_like(x)
        out[..., 0::2] = even * cos - odd * sin
        out[..., 1::2] = odd * cos + even * sin
        return out


# --------------------------------------------------------------------------------------------- model

class Model:
    """The forward pass. Caches are per sequence: a list (one entry per layer) of dicts of arrays
    c [t, kv_lora_rank] (normed latent), kr [t, rope] (roped shared key), ik [t, index_head_dim]."""

    def __init__(self, cfg, weights):
        arch = cfg.get("model_type")
        if arch not in ("deepseek_v3", "kimi_k2", "glm_moe_dsa"):
            raise ValueError("model_type %r not supported" % arch)
        if cfg.get("scoring_func", "sigmoid") != "sigmoid":
            raise ValueError("scoring_func %r not supported" % cfg["scoring_func"])
        self.cfg, self.w = cfg, weights
        self.dsa = arch == "glm_moe_dsa"
        shared = [t for t in cfg.get("indexer_types") or [] if t != "full"]
        if shared or cfg.get("index_topk_pattern") or cfg.get("index_topk_freq", 1) > 1:
            raise ValueError("DSA layers that share another layer's top-k are not supported")
        self.heads = cfg["num_attention_heads"]
        self.nope, self.rope_dim, self.v = cfg["qk_nope_head_dim"], cfg["qk_rope_head_dim"], cfg["v_head_dim"]
        self.kv_lora, self.q_lora = cfg["kv_lora_rank"], cfg.get("q_lora_rank")
        self.rope = Rope(cfg, self.rope_dim)
        self.scale = (self.nope + self.rope_dim) ** -0.5 * self.rope.softmax_factor
        self.eps = cfg["rms_norm_eps"]
        self.use_indexer = True   # False: GLM attends densely (for the dense/sparse switch test)
        self.check_forms = False  # True: decode also runs the expanded MLA form
        self.stats = {"mla_form_max_rel_diff": 0.0, "index_min_gap": math.inf, "route_min_gap": math.inf,
                      "sparse_queries": 0}

    def new_cache(self):
        idim = self.cfg.get("index_head_dim", 0)
        return [{"c": np.zeros((0, self.kv_lora)), "kr": np.zeros((0, self.rope_dim)), "ik": np.zeros((0, idim))}
                for _ in range(self.cfg["num_hidden_layers"])]

    def forward(self, new_tokens, caches, absorbed):
        """new_tokens: one list of token ids per sequence (varlen); caches: one per sequence, appended to.
        Returns logits [sum of lengths, vocab], rows in sequence order."""
        segs, start = [], 0
        for toks, cache in zip(new_tokens, caches):
            past = len(cache[0]["c"])
            segs.append((start, len(toks), np.arange(past, past + len(toks), dtype=np.float64)))
            start += len(toks)
        x = self.w["model.embed_tokens.weight"][np.concatenate([np.asarray(t, int) for t in new_tokens])]
        for layer in range(self.cfg["num_hidden_layers"]):
            p = "model.layers.%d." % layer
            h = rms_norm(x, self.w[p + "input_layernorm.weight"], self.eps)
            x = x + self.attention(layer, h, segs, [c[layer] for c in caches], absorbed)
            h = rms_norm(x, self.w[p + "post_attention_layernorm.weight"], self.eps)
            if layer < self.cfg["first_k_dense_replace"]:
                x = x + self.mlp(p + "mlp.", h)
            else:
                x = x + self.moe(p + "mlp.", h)
        x = rms_norm(x, self.w["model.norm.weight"], self.eps)
        return x @ self.w["lm_head.weight"].T

    # MLA ----------------------------------------------------------------------------------------------
    def attention(self, layer, h, segs, layer_caches, absorbed):
        a = "model.layers.%d.self_attn." % layer
        w, n_tok = self.w, h.shape[0]
        q_resid = None
        if self.q_lora is None:
            q = h @ w[a + "q_proj.weight"].T
        else:  # q_a_layernorm / kv_a_layernorm use the default eps 1e-6, not rms_norm_eps
            q_resid = rms_norm(h @ w[a + "q_a_proj.weight"].T, w[a + "q_a_layernorm.weight"], 1e-6)
            q = q_resid @ w[a + "q_b_proj.weight"].T
        q = q.reshape(n_tok, self.heads, self.nope + self.rope_dim)
        kv = h @ w[a + "kv_a_proj_with_mqa.weight"].T
        c = rms_norm(kv[:, :self.kv_lora], w[a + "kv_a_layernorm.weight"], 1e-6)
        kr = kv[:, self.kv_lora:]
        # kv_b_proj rows per head: [nope rows of W_UK; v rows of W_UV], each [*, kv_lora]
        kvb = w[a + "kv_b_proj.weight"].reshape(self.heads, self.nope + self.v, self.kv_lora)
        w_uk, w_uv = kvb[:, :self.nope], kvb[:, self.nope:]
        out = np.empty((n_tok, self.heads * self.v))
        for (start, n, pos), cache in zip(segs, layer_caches):
            sl = slice(start, start + n)
            q_nope, q_pe = q[sl, :, :self.nope], self.rope.apply(q[sl, :, self.nope:], pos)
            cache["c"] = np.concatenate([cache["c"], c[sl]])
            cache["kr"] = np.concatenate([cache["kr"], self.rope.apply(kr[sl], pos)])
            allowed = pos[:, None] >= np.arange(len(cache["c"]))[None, :]  # [n, t] causal
            if self.dsa and self.use_indexer:
                allowed = self.index_select(a, h[sl], q_resid[sl], pos, cache, allowed)
            args = (q_nope, q_pe, cache["c"], cache["kr"], allowed, w_uk, w_uv)
            o = self.mla_absorbed(*args) if absorbed else self.mla_expanded(*args)
            if absorbed and self.check_forms:
                ref = self.mla_expanded(*args)
                diff = np.max(np.abs(o - ref)) / np.max(np.abs(ref))
                self.stats["mla_form_max_rel_diff"] = max(self.stats["mla_form_max_rel_diff"], diff)
            out[sl] = o.reshape(n, -1)
        return out @ w[a + "o_proj.weight"].T

    def mla_expanded(self, q_nope, q_pe, c, kr, allowed, w_uk, w_uv):
        """Per-head keys [t, H, nope + rope] and values [t, H, v] from the latent; returns [n, H, v]."""
        k_nope = np.einsum("tc,hdc->thd", c, w_uk)
        v = np.einsum("tc,hdc->thd", c, w_uv)
        s = np.einsum("qhd,thd->hqt", q_nope, k_nope) + np.einsum("qhr,tr->hqt", q_pe, kr)
        p = softmax(np.where(allowed[None], s * self.scale, -np.inf))
        return np.einsum("hqt,thd->qhd", p, v)

    def mla_absorbed(self, q_nope, q_pe, c, kr, allowed, w_uk, w_uv):
        """W_UK folded into the query and W_UV applied after the sum: attention over [c; kr] only."""
        q_lat = np.einsum("qhd,hdc->qhc", q_nope, w_uk)           # [n, H, kv_lora]
        s = np.einsum("qhc,tc->hqt", q_lat, c) + np.einsum("qhr,tr->hqt", q_pe, kr)
        p = softmax(np.where(allowed[None], s * self.scale, -np.inf))
        o_lat = np.einsum("hqt,tc->qhc", p, c)                    # [n, H, kv_lora]
        return np.einsum("qhc,hdc->qhd", o_lat, w_uv)

    # DSA indexer (GLM) ----------------------------------------------------------------------------------
    def store_index_keys(self, k):
        """What reading back roped indexer keys [t, index_head_dim] written to the cache gives: exact
        here; the same-rounding references of test_engine_vs_reference.py round them as the engine's
        page pool stores them."""
        return k

    def index_select(self, a, h, q_resid, pos, cache, causal):
        """Narrows the causal mask [n, t] to each query's index_topk best keys."""
        w, ih, idim, topk = self.w, self.cfg["index_n_heads"], self.cfg["index_head_dim"], self.cfg["index_topk"]
        r = self.rope_dim
        q = (q_resid @ w[a + "indexer.wq_b.weight"].T).reshape(len(pos), ih, idim)
        q = np.concatenate([self.rope.apply(q[..., :r], pos), q[..., r:]], axis=-1)  # rope slice first
        k = layer_norm(h @ w[a + "indexer.wk.weight"].T, w[a + "indexer.k_norm.weight"],
                       w[a + "indexer.k_norm.bias"], 1e-6)
        k = np.concatenate([self.rope.apply(k[:, :r], pos), k[:, r:]], axis=-1)
        cache["ik"] = np.concatenate([cache["ik"], self.store_index_keys(k)])
        s = np.maximum(np.einsum("qhd,td->qht", q, cache["ik"]) * idim ** -0.5, 0.0)
        head_w = (h @ w[a + "indexer.weights_proj.weight"].T) * ih ** -0.5
        score = np.einsum("qh,qht->qt", head_w, s)
        allowed = causal.copy()
        for i in range(len(pos)):
            valid = np.flatnonzero(causal[i])
            if len(valid) <= topk:
                continue  # context within top-k: exact dense attention
            order = valid[np.argsort(-score[i, valid], kind="stable")]
            allowed[i, order[topk:]] = False
            gap = score[i, order[topk - 1]] - score[i, order[topk]]
            self.stats["index_min_gap"] = min(self.stats["index_min_gap"], gap)
            self.stats["sparse_queries"] += 1
        return allowed

    # MLP / MoE -----------------------------------------------------------------------------------------
    def mlp(self, m, x):
        w = self.w
        return (silu(x @ w[m + "gate_proj.weight"].T) * (x @ w[m + "up_proj.weight"].T)) @ w[m + "down_proj.weight"].T

    def route(self, m, x):
        """-> (expert ids [T, k], gate weights [T, k])."""
        cfg = self.cfg
        n_exp, k = cfg["n_routed_experts"], cfg["num_experts_per_tok"]
        n_group, topk_group = cfg.get("n_group") or 1, cfg.get("topk_group") or 1
        scores = 1.0 / (1.0 + np.exp(-(x @ self.w[m + "gate.weight"].T)))
        biased = scores + self.w[m + "gate.e_score_correction_bias"]
        grouped = biased.reshape(len(x), n_group, n_exp // n_group)
        group_score = np.sort(grouped, axis=-1)[..., -2:].sum(-1)
        keep = np.argsort(-group_score, axis=-1, kind="stable")[:, :topk_group]
        group_mask = np.zeros((len(x), n_group), bool)
        np.put_along_axis(group_mask, keep, True, axis=-1)
        biased = np.where(np.repeat(group_mask, n_exp // n_group, axis=-1), biased, -np.inf)
        order = np.argsort(-biased, axis=-1, kind="stable")
        ids = order[:, :k]
        gaps = np.take_along_axis(biased, order[:, k - 1:k], -1) - np.take_along_axis(biased, order[:, k:k + 1], -1)
        self.stats["route_min_gap"] = min(self.stats["route_min_gap"], float(gaps.min()))
        gates = np.take_along_axis(scores, ids, -1)
        if cfg.get("norm_topk_prob", True):
            gates = gates / (gates.sum(-1, keepdims=True) + 1e-20)
        return ids, gates * cfg["routed_scaling_factor"]

    def moe(self, m, x):
        ids, gates = self.route(m, x)
        y = self.mlp(m + "shared_experts.", x)
        for e in np.unique(ids):
            rows, slot = np.nonzero(ids == e)
            y[rows] += gates[rows, slot, None] * self.mlp(m + "experts.%d." % e, x[rows])
        return y


# ------------------------------------------------------------------------------------------ generation

def generate(model, prompts, decode_steps, check_forms=True):
    """Varlen prefill of all prompts, then greedy decode (absorbed MLA) with the KV caches.
    Returns dict: prefill_logits [sum(len), V], prompt_offsets [B+1], decode_tokens [N, B] (token fed
    at step s; decode_tokens[0] is the argmax of the prompt's last prefill row), decode_logits [N, B, V]."""
    model.check_forms = check_forms
    caches = [model.new_cache() for _ in prompts]
    prefill = model.forward(prompts, caches, absorbed=False)
    offsets = np.cumsum([0] + [len(p) for p in prompts])
    tokens = np.array([np.argmax(prefill[offsets[i + 1] - 1]) for i in range(len(prompts))])
    fed, logits = [], []
    for _ in range(decode_steps):
        fed.append(tokens)
        step = model.forward([[int(t)] for t in tokens], caches, absorbed=True)
        logits.append(step)
        tokens = np.argmax(step, axis=-1)
    vocab = prefill.shape[1]
    decode = np.array(logits).reshape(decode_steps, len(prompts), vocab)
    return {
        "prefill_logits": prefill,
        "prompt_offsets": offsets.astype(np.int64),
        "decode_tokens": np.array(fed, dtype=np.int64).reshape(decode_steps, len(prompts)),
        "decode_logits": decode,
        "prefill_top1_margin": top1_margin(prefill),
        "decode_top1_margin": top1_margin(decode),
    }


def top1_margin(logits):
    """(best - second best) / max|logit| per row: how much error a row's argmax can absorb."""
    s = np.sort(logits, axis=-1)
    return (s[..., -1] - s[..., -2]) / np.abs(logits).max(-1)


def main(argv=None):
    ap = argparse.ArgumentParser(description="float64 reference logits for a deepseek_v3 / glm_moe_dsa checkpoint")
    ap.add_argument("--checkpoint", required=True, help="directory with config.json and safetensors")
    ap.add_argument("--prompts", required=True, help='JSON file: [[token ids], ...] or {"prompts": [...]}')
    ap.add_argument("--decode-steps", type=int, default=32)
    ap.add_argument("--out", required=True, help="output .npz (format: docs/reference-check.md)")
    args = ap.parse_args(argv)
    with open(args.prompts) as f:
        prompts = json.load(f)
    if isinstance(prompts, dict):
        prompts = prompts["prompts"]
    cfg, weights = load_checkpoint(args.checkpoint)
    model = Model(cfg, weights)
    res = generate(model, prompts, args.decode_steps)
    res.update({k: np.float64(v) for k, v in model.stats.items()})
    np.savez(args.out, **res)
    print("reference: %d prompts, %d decode steps -> %s (MLA absorbed vs expanded max rel diff %.2e)"
          % (len(prompts), args.decode_steps, args.out, model.stats["mla_form_max_rel_diff"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
