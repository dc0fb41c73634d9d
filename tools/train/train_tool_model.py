#!/usr/bin/env python3
"""Trains Tandem's small tool-calling model: a `deepseek_v3` (MLA + MoE, Kimi K2's architecture)
checkpoint with Kimi K2's chat template and tool-call format, on the synthetic corpus of
tools/train/tool_corpus.py, with PyTorch on the CPU. Writes a model directory `tandem local` serves:

  config.json, generation_config.json, tiktoken.model, tokenizer_config.json  (tandem make-model
        --corpus: a 4,096-token BPE vocabulary trained on this corpus, Kimi K2's special tokens)
  model.safetensors        BF16 weights (the router's e_score_correction_bias in F32)
  heldout.jsonl            the held-out suite (`tandem eval tools --suite`), from another seed
  training.json            the run: settings, the loss curve, held-out validity during training

Everything follows from --seed (same seed, same corpus, same vocabulary, same initial weights; the
float arithmetic of training may differ between machines). Training never sees BFCL.

Needs Debian's python3-torch (1.13) with OpenBLAS (libopenblas0-pthread), jinja2 and tiktoken:
  apt-get install python3-torch libopenblas0-pthread
  python3 -m venv --system-site-packages .venv/train && .venv/train/bin/pip install -r scripts/requirements-train.txt
  .venv/train/bin/python tools/train/train_tool_model.py --out models/tool-tiny --tandem build/tools/tandem
docs/eval.md has the run's figures and its training curve.
"""
import argparse
import json
import math
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "engine", "text", "testdata"))
sys.path.insert(0, os.path.join(ROOT, "tests", "reference"))
import make_tiny_checkpoint  # noqa: E402  (tensor names and shapes, BF16 rounding, the safetensors writer)
import render_goldens  # noqa: E402  (the Kimi K2 chat template, rendered as transformers does)
import tiktoken_files  # noqa: E402
import tool_corpus  # noqa: E402

ARCH = {
    "architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3",
    "hidden_size": 256, "num_hidden_layers": 4, "first_k_dense_replace": 1, "intermediate_size": 512,
    "moe_intermediate_size": 256, "n_routed_experts": 8, "num_experts_per_tok": 2, "n_shared_experts": 1,
    "n_group": 1, "topk_group": 1, "routed_scaling_factor": 1.0, "norm_topk_prob": True,
    "scoring_func": "sigmoid", "topk_method": "noaux_tc", "hidden_act": "silu",
    "num_attention_heads": 8, "num_key_value_heads": 8, "q_lora_rank": None, "kv_lora_rank": 128,
    "qk_nope_head_dim": 32, "qk_rope_head_dim": 32, "v_head_dim": 32,
    "max_position_embeddings": 2048, "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "rope_scaling": None,
    "tie_word_embeddings": False, "attention_bias": False, "num_nextn_predict_layers": 0, "torch_dtype": "bfloat16",
}
SPECIALS = ["<|im_end|>", "<|im_user|>", "<|im_assistant|>", "<|im_system|>", "<|im_middle|>",
            "<|tool_calls_section_begin|>", "<|tool_calls_section_end|>", "<|tool_call_begin|>",
            "<|tool_call_argument_begin|>", "<|tool_call_end|>"]


# --------------------------------------------------------------------------------------- the data

def render(messages, tools, add_generation_prompt):
    case = {"messages": messages, "add_generation_prompt": add_generation_prompt,
            "tools": [json.dumps(t, ensure_ascii=False) for t in tools]}
    return render_goldens.render("kimi_k2.jinja", case)


def texts(sample):
    """(prompt, reply): the rendered conversation up to the assistant's turn, and that turn."""
    prompt = render(sample.messages, sample.tools, True)
    reply = {"role": "assistant", "content": sample.reply_content}
    if sample.reply_calls:
        reply["tool_calls"] = sample.reply_calls
    full = render(sample.messages + [reply], sample.tools, False)
    assert full.startswith(prompt), "the template's generation prompt is not a prefix of the answered turn"
    return prompt, full[len(prompt):]


def make_vocabulary(tandem, out_dir, samples):
    """tandem make-model over rendered samples (special tokens taken out: they are added tokens, not
    BPE text) and the tiny model's general English corpus (engine/text/data/tiny_corpus.txt), so that
    text outside the synthetic requests still encodes in few tokens."""
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        with open(os.path.join(ROOT, "engine", "text", "data", "tiny_corpus.txt")) as general:
            f.write(general.read())
        for s in samples:
            text = "".join(texts(s))
            for sp in SPECIALS:
                text = text.replace(sp, "\n")
            f.write(text + "\n")
        corpus = f.name
    try:
        subprocess.run([tandem, "make-model", "--out", out_dir, "--preset", "tiny", "--corpus", corpus,
                        "--vocab-size", "4096"], check=True)
    finally:
        os.unlink(corpus)


def load_tokenizer(model_dir):
    return tiktoken_files.load(model_dir, "tandem-tool")


PROMPT_WEIGHT = 0.2  # the prompt's tokens are predicted too, at this weight: free signal (the
                    # forward pass runs over them anyway) that teaches the template and the tools' JSON
CALL_WEIGHT = 1.0   # the tokens that decide: the reply's first token (call or decline), each call's
                    # function name and its arguments (where the values must be copied from the request)

_SPECIAL_SPLIT = re.compile("(" + "|".join(re.escape(s) for s in SPECIALS) + ")")


def encode(enc, sample, max_len, prompt_weight=PROMPT_WEIGHT, call_weight=CALL_WEIGHT):
    """(token ids, loss weights, the prompt's length) or None when too long. Weights: prompt_weight on the prompt's
    tokens, 1 on the reply's, call_weight on the reply's deciding tokens (its first token, and every
    call's name and arguments). The reply is encoded piece by piece between its special tokens, which
    BPE never merges across, so the ids are the same as encoding it whole."""
    prompt, reply = texts(sample)
    p = enc.encode(prompt, allowed_special="all")
    r, w = [], []
    region = None  # the special token that opened the current piece
    for piece in _SPECIAL_SPLIT.split(reply):
        if not piece:
            continue
        ids = enc.encode(piece, allowed_special="all")
        if piece in SPECIALS:
            region = piece
            weight = 1.0
        else:
            deciding = region in ("<|tool_call_begin|>", "<|tool_call_argument_begin|>")
            weight = call_weight if deciding else 1.0
        r += ids
        w += [weight] * len(ids)
    if w:
        w[0] = call_weight
    if len(p) + len(r) > max_len:
        return None
    return p + r, [prompt_weight] * len(p) + w, len(p)


# -------------------------------------------------------------------------------------- the model

class Rope:
    def __init__(self, dim, theta):
        self.inv_freq = 1.0 / theta ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim)

    def tables(self, n):
        ang = torch.arange(n, dtype=torch.float64)[:, None] * self.inv_freq[None, :]
        return torch.cos(ang).float(), torch.sin(ang).float()

    @staticmethod
    def apply(x, cos, sin):
        """x [B, T, dim] or [B, T, H, dim]: pairs (2i, 2i+1) rotated, as reference_model.py does."""
        if x.dim() == 4:
            cos, sin = cos.unsqueeze(-2), sin.unsqueeze(-2)
        even, odd = x[..., 0::2], x[..., 1::2]
        return torch.stack((even * cos - odd * sin, odd * cos + even * sin), dim=-1).flatten(-2)


def rms_norm(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


class Model(torch.nn.Module):
    """The deepseek_v3 forward pass of tests/reference/reference_model.py in torch (float32,
    expanded MLA, q_lora_rank null, one expert group), parameters named as the checkpoint's."""

    def __init__(self, cfg, seed, tied=False):
        super().__init__()
        self.cfg = cfg
        # tied: the output projection is the embedding (trained as one matrix, written to both
        # tensors of the untied checkpoint), so a head that moves a token's embedding forward
        # raises that token's logit: the shortest path to copying from the context
        self.tied = tied
        torch.manual_seed(seed)
        self.p = torch.nn.ParameterDict()
        self.bias = {}  # e_score_correction_bias per MoE layer: balanced by load, not by gradient
        for name, shape, kind in make_tiny_checkpoint.tensor_specs(cfg):
            key = name.replace(".", "/")
            if kind == "score_bias":
                self.bias[name] = torch.zeros(shape)
            elif kind == "norm":
                self.p[key] = torch.nn.Parameter(torch.ones(shape))
            else:
                std = 0.02
                if name.endswith(("o_proj.weight", "down_proj.weight")):
                    std = 0.02 / math.sqrt(2 * cfg["num_hidden_layers"])
                self.p[key] = torch.nn.Parameter(torch.randn(shape) * std)
        self.rope = Rope(cfg["qk_rope_head_dim"], cfg["rope_theta"])
        self.scale = (cfg["qk_nope_head_dim"] + cfg["qk_rope_head_dim"]) ** -0.5
        self.load = {}

    def w(self, name):
        return self.p[name.replace(".", "/")]

    def forward(self, ids):
        cfg, b, t = self.cfg, ids.shape[0], ids.shape[1]
        cos, sin = self.rope.tables(t)
        causal = torch.ones(t, t, dtype=torch.bool).tril()
        x = self.w("model.embed_tokens.weight")[ids]
        for layer in range(cfg["num_hidden_layers"]):
            p = "model.layers.%d." % layer
            h = rms_norm(x, self.w(p + "input_layernorm.weight"), cfg["rms_norm_eps"])
            x = x + self.attention(p + "self_attn.", h, cos, sin, causal)
            h = rms_norm(x, self.w(p + "post_attention_layernorm.weight"), cfg["rms_norm_eps"])
            if layer < cfg["first_k_dense_replace"]:
                x = x + self.mlp(p + "mlp.", h)
            else:
                x = x + self.moe(p + "mlp.", h)
        x = rms_norm(x, self.w("model.norm.weight"), cfg["rms_norm_eps"])
        return x @ self.w("model.embed_tokens.weight" if self.tied else "lm_head.weight").t()

    def attention(self, a, h, cos, sin, causal):
        cfg = self.cfg
        heads, nope, rope, v, lora = (cfg["num_attention_heads"], cfg["qk_nope_head_dim"], cfg["qk_rope_head_dim"],
                                      cfg["v_head_dim"], cfg["kv_lora_rank"])
        b, t, _ = h.shape
        q = (h @ self.w(a + "q_proj.weight").t()).view(b, t, heads, nope + rope)
        q = torch.cat([q[..., :nope], Rope.apply(q[..., nope:], cos, sin)], dim=-1)
        kv = h @ self.w(a + "kv_a_proj_with_mqa.weight").t()
        c = rms_norm(kv[..., :lora], self.w(a + "kv_a_layernorm.weight"), 1e-6)
        kr = Rope.apply(kv[..., lora:], cos, sin)                             # [b, t, rope]
        kvb = (c @ self.w(a + "kv_b_proj.weight").t()).view(b, t, heads, nope + v)
        k = torch.cat([kvb[..., :nope], kr[:, :, None, :].expand(b, t, heads, rope)], dim=-1)
        s = torch.einsum("bqhd,bkhd->bhqk", q, k) * self.scale
        s = s.masked_fill(~causal, float("-inf"))
        o = torch.einsum("bhqk,bkhd->bqhd", s.softmax(-1), kvb[..., nope:])
        return o.reshape(b, t, heads * v) @ self.w(a + "o_proj.weight").t()

    def mlp(self, m, x):
        g = F.silu(x @ self.w(m + "gate_proj.weight").t()) * (x @ self.w(m + "up_proj.weight").t())
        return g @ self.w(m + "down_proj.weight").t()

    def moe(self, m, x):
        cfg = self.cfg
        shape = x.shape
        x = x.reshape(-1, shape[-1])
        scores = torch.sigmoid(x @ self.w(m + "gate.weight").t())
        bias = self.bias[m + "gate.e_score_correction_bias"]
        ids = torch.topk(scores.detach() + bias, cfg["num_experts_per_tok"], dim=-1).indices
        gates = scores.gather(1, ids)
        gates = gates / (gates.sum(-1, keepdim=True) + 1e-20) * cfg["routed_scaling_factor"]
        y = self.mlp(m + "shared_experts.", x)
        counts = torch.zeros(cfg["n_routed_experts"])
        for e in range(cfg["n_routed_experts"]):
            rows, slot = torch.nonzero(ids == e, as_tuple=True)
            counts[e] = len(rows)
            if len(rows):
                y = y.index_add(0, rows, gates[rows, slot, None] * self.mlp(m + "experts.%d." % e, x[rows]))
        self.load[m] = counts
        return y.reshape(shape)

    def balance(self, rate):
        """Aux-loss-free balancing (DeepSeek-V3): bias up for experts under their share, down over."""
        for m, counts in self.load.items():
            b = self.bias[m + "gate.e_score_correction_bias"]
            b += rate * torch.sign(counts.mean() - counts)

    def state_for_checkpoint(self):
        out = {}
        for name, shape, kind in make_tiny_checkpoint.tensor_specs(self.cfg):
            # tied: lm_head.weight is written as a copy of the embedding it was trained as
            src = "model.embed_tokens.weight" if self.tied and name == "lm_head.weight" else name
            t = self.bias[name] if kind == "score_bias" else self.w(src)
            out[name] = (kind, t.detach().float().numpy().reshape(shape))
        return out


def write_checkpoint(model, path):
    tensors = {}
    for name, (kind, x) in model.state_for_checkpoint().items():
        if kind == "score_bias":
            tensors[name] = ("F32", x.shape, x.astype("<f4").tobytes())
        else:
            tensors[name] = ("BF16", x.shape, make_tiny_checkpoint.to_bf16_bits(x).astype("<u2").tobytes())
    with open(path, "wb") as f:
        f.write(make_tiny_checkpoint.safetensors_bytes(tensors, {"format": "pt"}))


def load_weights(model, model_dir):
    """A written checkpoint's weights (BF16 values) into `model`."""
    import reference_model
    _, weights = reference_model.load_checkpoint(model_dir)
    with torch.no_grad():
        for name, t in weights.items():
            if name.endswith("e_score_correction_bias"):
                model.bias[name] = torch.tensor(t, dtype=torch.float32)
            else:
                model.w(name).copy_(torch.tensor(t, dtype=torch.float32))


def check_against_reference(model, model_dir, prompts):
    """The torch forward pass on the written (BF16) weights against tests/reference/reference_model.py
    (float64 numpy, written from the architecture's definition) on the same tokens: the largest
    logit difference relative to the largest logit. Catches a forward pass that trains one model and
    writes another (rope layout, tensor names, norms)."""
    import reference_model
    cfg, weights = reference_model.load_checkpoint(model_dir)
    ref = reference_model.Model(cfg, weights)
    mirror = Model(cfg, 0)
    load_weights(mirror, model_dir)
    with torch.no_grad():
        worst = 0.0
        for ids in prompts:
            want = ref.forward([ids], [ref.new_cache()], absorbed=False)
            got = mirror(torch.tensor([ids]))[0].double().numpy()
            worst = max(worst, float(np.abs(got - want).max() / np.abs(want).max()))
    return worst


def curve_svg(curve, title):
    """The loss curve as a standalone SVG (loss on a log axis against the step)."""
    w, h, left, right, top, bottom = 720, 360, 60, 20, 40, 40
    steps = [c["step"] for c in curve]
    losses = [max(1e-3, c["loss"]) for c in curve]
    lo, hi = math.log10(min(losses)), math.log10(max(losses))
    hi = hi if hi > lo else lo + 1

    def xy(step, loss):
        x = left + (w - left - right) * step / max(1, steps[-1])
        y = top + (h - top - bottom) * (hi - math.log10(loss)) / (hi - lo)
        return "%.1f,%.1f" % (x, y)

    ticks = []
    for e in range(math.floor(lo), math.ceil(hi) + 1):
        for m in (1, 2, 5):
            v = m * 10.0 ** e
            if lo <= math.log10(v) <= hi:
                y = xy(0, v).split(",")[1]
                ticks.append('<line x1="%d" x2="%d" y1="%s" y2="%s" stroke="#ddd"/><text x="%d" y="%s" '
                             'font-size="11" text-anchor="end">%g</text>' % (left, w - right, y, y, left - 4, y, v))
    points = " ".join(xy(s, l) for s, l in zip(steps, losses))
    return ('<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif">'
            '<rect width="100%%" height="100%%" fill="white"/><text x="%d" y="22" font-size="14">%s</text>%s'
            '<polyline fill="none" stroke="#1f77b4" stroke-width="1.5" points="%s"/>'
            '<text x="%d" y="%d" font-size="11" text-anchor="middle">step (%d)</text>'
            '<text x="14" y="%d" font-size="11" transform="rotate(-90 14 %d)">training loss (nats/token)</text>'
            '</svg>\n' % (w, h, left, title, "".join(ticks), points, (w + left) // 2, h - 10, steps[-1],
                         h // 2, h // 2))


# ---------------------------------------------------------------------------------- train and check

def batches(data, tokens_per_batch, rng):
    """Lists of samples of similar length, about tokens_per_batch padded tokens each."""
    order = sorted(range(len(data)), key=lambda i: len(data[i][0]) + rng.random())
    out, cur = [], []
    for i in order:
        if cur and (len(cur) + 1) * len(data[i][0]) > tokens_per_batch:
            out.append(cur)
            cur = []
        cur.append(i)
    if cur:
        out.append(cur)
    rng.shuffle(out)
    return out


def collate(data, idx):
    n = max(len(data[i][0]) for i in idx)
    ids = torch.zeros(len(idx), n, dtype=torch.long)
    mask = torch.zeros(len(idx), n)
    reply = torch.zeros(len(idx), n)  # 1 on the reply's tokens, whatever the weights
    for r, i in enumerate(idx):
        toks, m, prompt_len = data[i]
        ids[r, :len(toks)] = torch.tensor(toks)
        mask[r, :len(m)] = torch.tensor(m, dtype=torch.float32)
        reply[r, prompt_len:len(toks)] = 1.0
    return ids, mask, reply


@torch.no_grad()
def greedy(model, enc, prompt_ids, max_new, stop_id):
    ids = list(prompt_ids)
    for _ in range(max_new):
        nxt = int(model(torch.tensor([ids]))[0, -1].argmax())
        ids.append(nxt)
        if nxt == stop_id:
            break
    return enc.decode(ids[len(prompt_ids):])


def parse_reply(text):
    """Kimi K2's tool-call section -> [(name, arguments text)]; None when it is malformed."""
    begin, end = "<|tool_calls_section_begin|>", "<|tool_calls_section_end|>"
    if begin not in text:
        return []
    body = text.split(begin, 1)[1]
    if end not in body:
        return None
    calls = []
    for part in body.split(end, 1)[0].split("<|tool_call_begin|>")[1:]:
        if "<|tool_call_argument_begin|>" not in part or "<|tool_call_end|>" not in part:
            return None
        cid, rest = part.split("<|tool_call_argument_begin|>", 1)
        calls.append((cid.strip().split(".", 1)[-1].rsplit(":", 1)[0], rest.split("<|tool_call_end|>", 1)[0]))
    return calls


def quick_probe(model, enc, heldout, n):
    """Over the first n held-out samples (a training-time probe; the figures that count come from
    `tandem eval tools`): json (share of calls whose arguments parse as a JSON object), decision
    (share of samples where it calls or declines as it should), arguments (share of the samples that
    want calls whose calls have exactly the expected names and arguments: the copying that the
    validity of a call does not show)."""
    made = valid = decided = want = right = 0
    stop = enc.encode("<|im_end|>", allowed_special="all")[0]
    for s in heldout[:n]:
        prompt, _ = texts(s)
        calls = parse_reply(greedy(model, enc, enc.encode(prompt, allowed_special="all"), 96, stop))
        expected = [(c["name"], json.loads(c["arguments"])) for c in s.reply_calls]
        decided += (calls is not None and bool(calls) == bool(expected))
        want += bool(expected)
        if calls is None:
            made += 1
            continue
        got = []
        for name, args in calls:
            made += 1
            try:
                parsed = json.loads(args)
                valid += isinstance(parsed, dict)
            except json.JSONDecodeError:
                parsed = None
            got.append((name, parsed))
        right += bool(expected) and got == expected
    return {"json": round(valid / made, 3) if made else None, "decision": round(decided / n, 3),
            "arguments": round(right / want, 3) if want else None}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--tandem", default=os.path.join(ROOT, "build", "tools", "tandem"))
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--train-samples", type=int, default=24000)
    ap.add_argument("--heldout-samples", type=int, default=400)
    ap.add_argument("--epochs", type=float, default=1.0)
    ap.add_argument("--tokens-per-batch", type=int, default=8192)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--max-len", type=int, default=640)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--max-minutes", type=float, default=0,
                    help="training time limit (0: none); the learning-rate schedule ends with it")
    ap.add_argument("--contrast", type=float, default=0.0,
                    help="share of training draws that are one request with and without its tool offered")
    ap.add_argument("--copy", type=float, default=0.0,
                    help="share of training draws that are a copying drill (a save_note call repeating the request)")
    ap.add_argument("--tie-embeddings", action="store_true",
                    help="train lm_head as the embedding matrix (both tensors written the same)")
    ap.add_argument("--init", default="", help="start from this model directory's weights (its vocabulary is "
                                               "copied: the corpus's samples are drawn with --seed as always)")
    ap.add_argument("--prompt-weight", type=float, default=PROMPT_WEIGHT, help="loss weight of the prompt's tokens")
    ap.add_argument("--call-weight", type=float, default=CALL_WEIGHT,
                    help="loss weight of the reply's first token and of every call's name and arguments")
    ap.add_argument("--probe-every", type=int, default=250, help="steps between held-out probes")
    ap.add_argument("--probe-samples", type=int, default=16, help="held-out samples per probe")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    started = time.time()

    train_samples = tool_corpus.samples(args.seed, args.train_samples, args.contrast, args.copy)
    heldout = tool_corpus.samples(args.seed + 1000, args.heldout_samples)
    os.makedirs(args.out, exist_ok=True)
    if args.init:
        for name in ("tiktoken.model", "tokenizer_config.json", "config.json", "generation_config.json"):
            shutil.copyfile(os.path.join(args.init, name), os.path.join(args.out, name))
    else:
        make_vocabulary(args.tandem, args.out, train_samples[:6000])
    enc = load_tokenizer(args.out)
    with open(os.path.join(args.out, "config.json")) as f:
        made = json.load(f)
    # --init: the starting model's own architecture (its config.json was copied above)
    cfg = made if args.init else dict(ARCH, vocab_size=made["vocab_size"], bos_token_id=made.get("bos_token_id"),
                                      eos_token_id=made.get("eos_token_id"))
    data = [d for d in (encode(enc, s, args.max_len, args.prompt_weight, args.call_weight) for s in train_samples)
            if d is not None]
    lengths = [len(d[0]) for d in data]
    print("train: %d samples (%d over %d tokens dropped), mean %.0f tokens; vocab %d" % (
        len(data), len(train_samples) - len(data), args.max_len, sum(lengths) / len(lengths), cfg["vocab_size"]))

    model = Model(cfg, args.seed, args.tie_embeddings)
    if args.init:
        load_weights(model, args.init)
    params = sum(p.numel() for p in model.p.values())
    print("model: %.2fM parameters" % (params / 1e6))
    opt = torch.optim.AdamW(model.p.values(), lr=args.lr, betas=(0.9, 0.95), weight_decay=0.01)
    rng = random.Random(args.seed)
    plan = []
    epochs = max(1, math.ceil(args.epochs))
    for _ in range(epochs):
        plan += batches(data, args.tokens_per_batch, rng)
    plan = plan[:int(len(plan) * args.epochs / epochs)]
    warmup = max(1, len(plan) // 20)
    train_started = time.time()
    curve, probes, steps_done = [], [], 0
    for step, idx in enumerate(plan):
        # the cosine runs over the plan, or over --max-minutes when that comes first (so that a run cut
        # by the clock still ends at a low learning rate rather than mid-schedule)
        progress = step / len(plan)
        if args.max_minutes:
            progress = max(progress, (time.time() - train_started) / 60 / args.max_minutes)
        if progress >= 1:
            print("stopping at the time limit")
            break
        lr = args.lr * min(1.0, (step + 1) / warmup) * 0.5 * (1 + math.cos(math.pi * progress))
        for g in opt.param_groups:
            g["lr"] = lr
        ids, mask, reply = collate(data, idx)
        logits = model(ids[:, :-1])
        ce = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1), reduction="none")
        weights = mask[:, 1:].reshape(-1)
        loss = (ce * weights).sum() / weights.sum()
        in_reply = reply[:, 1:].reshape(-1)  # the predicted positions that are the reply's tokens
        reply_loss = float((ce.detach() * in_reply).sum() / in_reply.sum().clamp(min=1))
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.p.values(), 1.0)
        opt.step()
        model.balance(1e-3)
        steps_done = step + 1
        minutes = (time.time() - started) / 60
        if step % 20 == 0 or step == len(plan) - 1:
            curve.append({"step": step, "minutes": round(minutes, 2), "loss": round(float(loss), 4),
                          "reply_loss": round(reply_loss, 4), "lr": lr})
            print("step %d/%d  loss %.4f  reply %.4f  lr %.2e  %.1f min" % (
                step, len(plan), float(loss), reply_loss, lr, minutes), flush=True)
        if step > 0 and step % args.probe_every == 0:
            probes.append(dict(step=step, **quick_probe(model, enc, heldout, args.probe_samples)))
            print("  held-out probe: %s" % probes[-1], flush=True)

    write_checkpoint(model, os.path.join(args.out, "model.safetensors"))
    with open(os.path.join(args.out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
        f.write("\n")
    with open(os.path.join(args.out, "heldout.jsonl"), "w") as f:
        for i, s in enumerate(heldout):
            f.write(json.dumps(s.case("heldout-%d" % i), ensure_ascii=False) + "\n")
    with open(os.path.join(args.out, "training.json"), "w") as f:
        json.dump({"seed": args.seed, "train_samples": len(data), "heldout_samples": len(heldout),
                   "steps": steps_done, "parameters": params, "minutes": round((time.time() - started) / 60, 1),
                   "torch": torch.__version__, "threads": args.threads, "lr": args.lr,
                   "tokens_per_batch": args.tokens_per_batch, "prompt_weight": args.prompt_weight,
                   "call_weight": args.call_weight, "contrast": args.contrast, "copy": args.copy,
                   "tie_embeddings": args.tie_embeddings, "init": args.init, "curve": curve, "probes": probes},
                  f, indent=1)
        f.write("\n")
    prompts = [enc.encode(texts(s)[0], allowed_special="all") for s in heldout[:2]]
    diff = check_against_reference(model, args.out, prompts)
    print("torch forward on the written weights vs reference_model.py: max |logit diff| / max |logit| = %.2e" % diff)
    if diff > 1e-4:
        print("the trained forward pass and the reference disagree: the checkpoint is not the model trained")
        return 1
    with open(os.path.join(args.out, "training.svg"), "w") as f:
        f.write(curve_svg(curve, "tool-tiny: weighted loss per token (prompt %.2g, reply 1, calls %.2g)" % (
            args.prompt_weight, args.call_weight)))
    print("wrote %s (%.1f min)" % (args.out, (time.time() - started) / 60))
    return 0


if __name__ == "__main__":
    sys.exit(main())
