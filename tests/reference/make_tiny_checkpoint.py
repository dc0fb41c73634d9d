#!/usr/bin/env python3
"""Writes tiny random checkpoints in Hugging Face layout (config.json + model.safetensors).

Three variants, each fully determined by its seed:
  dsv3       `deepseek_v3` (Kimi K2.x architecture), q_lora_rank set
  dsv3_noq   `deepseek_v3` with q_lora_rank null (q_proj instead of q_a/q_b)
  glm        `glm_moe_dsa` (GLM 5.x architecture): MLA + DSA indexer, GLM's nope/v ratio

Weights are BF16 (round-to-nearest-even from float32) except the router's
`e_score_correction_bias`, which real checkpoints keep in F32. Tensor names are the ones
transformers' DeepseekV3ForCausalLM / GlmMoeDsaForCausalLM load (per-expert names, as on the Hub).

The safetensors file is written here byte by byte (sorted names, 8-byte aligned header), so the bytes
depend only on numpy's PCG64 stream and not on the safetensors package version: the goldens record
a sha256 of each file and the test checks that regeneration reproduces it.

Usage: make_tiny_checkpoint.py OUT_DIR [--variant dsv3|dsv3_noq|glm ...]
       (writes OUT_DIR/<variant>/{config.json,model.safetensors})
"""
import argparse
import hashlib
import json
import os
import struct

import numpy as np

_YARN = {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64,
         "beta_fast": 32, "beta_slow": 1, "mscale": 0.9, "mscale_all_dim": 0.7}

_COMMON = {
    "hidden_size": 64, "intermediate_size": 128, "moe_intermediate_size": 32,
    "num_hidden_layers": 3, "first_k_dense_replace": 1,
    "num_attention_heads": 4, "num_key_value_heads": 4,
    "kv_lora_rank": 32, "q_lora_rank": 48, "qk_rope_head_dim": 16,
    "n_routed_experts": 8, "num_experts_per_tok": 2, "n_shared_experts": 1,
    "n_group": 2, "topk_group": 1, "routed_scaling_factor": 2.5, "norm_topk_prob": True,
    "scoring_func": "sigmoid", "topk_method": "noaux_tc", "hidden_act": "silu",
    "vocab_size": 256, "max_position_embeddings": 256, "rms_norm_eps": 1e-6,
    "rope_theta": 10000.0, "rope_scaling": _YARN, "tie_word_embeddings": False,
    "attention_bias": False, "bos_token_id": 0, "eos_token_id": 1, "torch_dtype": "bfloat16",
}

VARIANTS = {
    "dsv3": dict(_COMMON, architectures=["DeepseekV3ForCausalLM"], model_type="deepseek_v3",
                 qk_nope_head_dim=32, v_head_dim=32, num_nextn_predict_layers=0, seed=1001),
    "dsv3_noq": dict(_COMMON, architectures=["DeepseekV3ForCausalLM"], model_type="deepseek_v3",
                     q_lora_rank=None, num_hidden_layers=2, qk_nope_head_dim=32, v_head_dim=32,
                     num_nextn_predict_layers=0, seed=1002),
    # GLM: nope:v = 3:4 as in GLM 5 (192:256); DSA indexer with a small top-k so that prompts longer
    # than 8 tokens take the sparse path.
    "glm": dict(_COMMON, architectures=["GlmMoeDsaForCausalLM"], model_type="glm_moe_dsa",
                qk_nope_head_dim=48, v_head_dim=64, index_n_heads=8, index_head_dim=32,
                index_topk=8, rms_norm_eps=1e-5, seed=1003),
}


def to_bf16_bits(x):
    """float -> uint16 BF16 bit patterns, round to nearest even (no NaNs here)."""
    b = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    b = (b + 0x7FFF + ((b >> 16) & 1)) >> 16
    return b.astype(np.uint16)


def tensor_specs(cfg):
    """Yields (name, shape, kind) in a fixed order; kind picks the initialisation."""
    h, heads = cfg["hidden_size"], cfg["num_attention_heads"]
    nope, rope, v = cfg["qk_nope_head_dim"], cfg["qk_rope_head_dim"], cfg["v_head_dim"]
    kv_lora, q_lora = cfg["kv_lora_rank"], cfg["q_lora_rank"]
    yield "model.embed_tokens.weight", (cfg["vocab_size"], h), "embed"
    for i in range(cfg["num_hidden_layers"]):
        p = "model.layers.%d." % i
        yield p + "input_layernorm.weight", (h,), "norm"
        yield p + "post_attention_layernorm.weight", (h,), "norm"
        a = p + "self_attn."
        if q_lora is None:
            yield a + "q_proj.weight", (heads * (nope + rope), h), "linear"
        else:
            yield a + "q_a_proj.weight", (q_lora, h), "linear"
            yield a + "q_a_layernorm.weight", (q_lora,), "norm"
            yield a + "q_b_proj.weight", (heads * (nope + rope), q_lora), "linear"
        yield a + "kv_a_proj_with_mqa.weight", (kv_lora + rope, h), "linear"
        yield a + "kv_a_layernorm.weight", (kv_lora,), "norm"
        yield a + "kv_b_proj.weight", (heads * (nope + v), kv_lora), "linear"
        yield a + "o_proj.weight", (h, heads * v), "linear"
        if cfg["model_type"] == "glm_moe_dsa":
            ih, idim = cfg["index_n_heads"], cfg["index_head_dim"]
            yield a + "indexer.wq_b.weight", (ih * idim, q_lora), "linear"
            yield a + "indexer.wk.weight", (idim, h), "linear"
            yield a + "indexer.k_norm.weight", (idim,), "norm"
            yield a + "indexer.k_norm.bias", (idim,), "bias"
            yield a + "indexer.weights_proj.weight", (ih, h), "linear"
        m = p + "mlp."
        if i < cfg["first_k_dense_replace"]:
            inter = cfg["intermediate_size"]
            yield m + "gate_proj.weight", (inter, h), "linear"
            yield m + "up_proj.weight", (inter, h), "linear"
            yield m + "down_proj.weight", (h, inter), "linear"
            continue
        inter = cfg["moe_intermediate_size"]
        yield m + "gate.weight", (cfg["n_routed_experts"], h), "router"
        yield m + "gate.e_score_correction_bias", (cfg["n_routed_experts"],), "score_bias"
        for e in range(cfg["n_routed_experts"]):
            yield m + "experts.%d.gate_proj.weight" % e, (inter, h), "linear"
            yield m + "experts.%d.up_proj.weight" % e, (inter, h), "linear"
            yield m + "experts.%d.down_proj.weight" % e, (h, inter), "linear"
        s = inter * cfg["n_shared_experts"]
        yield m + "shared_experts.gate_proj.weight", (s, h), "linear"
        yield m + "shared_experts.up_proj.weight", (s, h), "linear"
        yield m + "shared_experts.down_proj.weight", (h, s), "linear"
    yield "model.norm.weight", (h,), "norm"
    yield "lm_head.weight", (cfg["vocab_size"], h), "linear"


def init_tensor(rng, shape, kind):
    """float32 values; scales keep activations O(1) so that logits are well spread."""
    if kind == "embed":
        return rng.standard_normal(shape)
    if kind == "norm":
        return 1.0 + 0.2 * rng.standard_normal(shape)
    if kind == "bias":
        return 0.1 * rng.standard_normal(shape)
    if kind == "score_bias":
        return 0.05 * rng.standard_normal(shape)
    if kind == "router":
        return rng.standard_normal(shape) / np.sqrt(shape[1])
    return 1.2 * rng.standard_normal(shape) / np.sqrt(shape[1])  # linear [out, in]


def make_tensors(cfg):
    """name -> (safetensors dtype, shape, raw little-endian bytes)."""
    rng = np.random.default_rng(cfg["seed"])
    out = {}
    for name, shape, kind in tensor_specs(cfg):
        x = init_tensor(rng, shape, kind).astype(np.float32)
        if kind == "score_bias":
            out[name] = ("F32", shape, x.astype("<f4").tobytes())
        else:
            out[name] = ("BF16", shape, to_bf16_bits(x).astype("<u2").tobytes())
    return out


def safetensors_bytes(tensors, metadata):
    header, offset, blobs = {"__metadata__": metadata}, 0, []
    for name in sorted(tensors):
        dtype, shape, raw = tensors[name]
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":"), sort_keys=True).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(blobs)


def hf_config(cfg):
    return {k: v for k, v in cfg.items() if k != "seed"}


def write_variant(out_dir, variant):
    """Writes out_dir/{config.json,model.safetensors}; returns their sha256 (hex) by file name."""
    cfg = VARIANTS[variant]
    os.makedirs(out_dir, exist_ok=True)
    files = {
        "config.json": (json.dumps(hf_config(cfg), indent=2, sort_keys=True) + "\n").encode(),
        "model.safetensors": safetensors_bytes(make_tensors(cfg), {"format": "pt"}),
    }
    digests = {}
    for name, data in files.items():
        with open(os.path.join(out_dir, name), "wb") as f:
            f.write(data)
        digests[name] = hashlib.sha256(data).hexdigest()
    return digests


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out_dir")
    ap.add_argument("--variant", action="append", choices=sorted(VARIANTS))
    args = ap.parse_args()
    for variant in args.variant or sorted(VARIANTS):
        d = write_variant(os.path.join(args.out_dir, variant), variant)
        print(variant, d["model.safetensors"][:16], os.path.getsize(os.path.join(args.out_dir, variant, "model.safetensors")))


if __name__ == "__main__":
    main()
