#!/usr/bin/env python3
"""Golden logits from Hugging Face transformers for the tiny checkpoints (run by hand, not in CI).

For each variant of make_tiny_checkpoint.py: writes the checkpoint to a temp dir, loads it with
AutoModelForCausalLM (float32, eager attention), runs each prompt of prompts.json alone (batch 1, so
no padding enters the math), records the logits of every prefill position and 32 greedy decode steps
with transformers' own KV cache, and writes goldens/<variant>.npz (float32 logits). The same run in
float64 is recorded as `hf_f64_max_rel_diff` (how far HF's own float32 path is from its float64 path;
HF keeps RMSNorm, RoPE tables and the router in float32 even then).

Needs torch + transformers (never installed in CI), e.g.:
  /tmp/ctvenv/bin/python tests/reference/gen_hf_goldens.py
"""
import argparse
import json
import os
import sys
import tempfile

import numpy as np
import torch
import transformers
from transformers import AutoModelForCausalLM

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_tiny_checkpoint  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
DECODE_STEPS = 32


def run_prompt(model, prompt, steps):
    """-> (prefill logits [n, V], fed tokens [steps], decode logits [steps, V]) as float64 numpy."""
    with torch.no_grad():
        out = model(input_ids=torch.tensor([prompt]), use_cache=True)
        cache = getattr(out, "cache", None) or out.past_key_values
        prefill = out.logits[0].double().numpy()
        token = int(np.argmax(prefill[-1]))
        fed, logits = [], []
        for _ in range(steps):
            fed.append(token)
            out = model(input_ids=torch.tensor([[token]]), cache=cache, use_cache=True)
            cache = getattr(out, "cache", None) or out.past_key_values
            row = out.logits[0, -1].double().numpy()
            logits.append(row)
            token = int(np.argmax(row))
    return prefill, fed, np.array(logits)


def run_model(ckpt, prompts, dtype):
    model = AutoModelForCausalLM.from_pretrained(ckpt, dtype=dtype, attn_implementation="eager",
                                                 experts_implementation="eager")
    model.eval()
    pre, fed, dec = zip(*(run_prompt(model, p, DECODE_STEPS) for p in prompts))
    return np.concatenate(pre), np.array(fed).T, np.stack(dec, axis=1)  # [N, B], [N, B, V]


def row_rel(a, b):
    return float(np.max(np.abs(a - b).max(-1) / np.abs(b).max(-1)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out-dir", default=os.path.join(HERE, "goldens"))
    ap.add_argument("--variant", action="append", choices=sorted(make_tiny_checkpoint.VARIANTS))
    args = ap.parse_args()
    with open(os.path.join(HERE, "prompts.json")) as f:
        prompts = json.load(f)["prompts"]
    os.makedirs(args.out_dir, exist_ok=True)
    torch.manual_seed(0)
    for variant in args.variant or sorted(make_tiny_checkpoint.VARIANTS):
        with tempfile.TemporaryDirectory() as tmp:
            digests = make_tiny_checkpoint.write_variant(tmp, variant)
            pre32, fed32, dec32 = run_model(tmp, prompts, torch.float32)
            pre64, fed64, dec64 = run_model(tmp, prompts, torch.float64)
        meta = {
            "variant": variant, "transformers": transformers.__version__, "torch": torch.__version__,
            "numpy": np.__version__, "dtype": "float32", "attn_implementation": "eager", "experts_implementation": "eager",
            "decode_steps": DECODE_STEPS, "checkpoint_sha256": digests,
            "hf_f64_max_rel_diff": max(row_rel(pre32, pre64), row_rel(dec32, dec64)),
            "hf_f64_same_tokens": bool((fed32 == fed64).all()),
        }
        offsets = np.cumsum([0] + [len(p) for p in prompts]).astype(np.int64)
        path = os.path.join(args.out_dir, variant + ".npz")
        np.savez_compressed(path, prefill_logits=pre32.astype(np.float32), prompt_offsets=offsets,
                            prompt_tokens=np.concatenate(prompts).astype(np.int64),
                            decode_tokens=fed32.astype(np.int64), decode_logits=dec32.astype(np.float32),
                            meta=np.array(json.dumps(meta, sort_keys=True)))
        print("%s: %d bytes, %s" % (path, os.path.getsize(path), json.dumps(meta, sort_keys=True)))


if __name__ == "__main__":
    main()
