#!/usr/bin/env python3
"""Builds the small tokenizers the oracle test (tests/python/test_tokenizer_oracle.py) compares with.

Run from the repo root with the pinned test packages: .venv/bin/python engine/text/testdata/make_vocabs.py
  glm_like/tokenizer.json   byte-level BPE trained by PyPI `tokenizers` (3000 merges) with GLM's
                            pre-tokenizer layout (Split on the cl100k pattern, then ByteLevel) and
                            GLM-style special tokens.
  kimi_like/tiktoken.model  tiktoken ranks (base64 token, rank) from that vocabulary: the 256 bytes,
                            then the merged tokens in merge order; used with Kimi K2's pattern.
  kimi_like/tokenizer_config.json  Kimi-style special tokens (added_tokens_decoder).
The corpus and the test strings come from `corpus()` / `random_strings()`, deterministic in a seed.
"""
import json
import os
import random

HERE = os.path.dirname(os.path.abspath(__file__))

CL100K = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
          r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
KIMI = "|".join([
    r"""[\p{Han}]+""",
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""\p{N}{1,3}""",
    r""" ?[^\s\p{L}\p{N}]+[\r\n]*""",
    r"""\s*[\r\n]+""",
    r"""\s+(?!\S)""",
    r"""\s+""",
])
GLM_SPECIALS = ["<|endoftext|>", "[MASK]", "[gMASK]", "[sMASK]", "<sop>", "<eop>", "<|system|>", "<|user|>",
                "<|assistant|>", "<|observation|>", "<tool_call>", "</tool_call>", "<arg_key>", "</arg_key>"]
KIMI_SPECIALS = ["[BOS]", "[EOS]", "<|im_end|>", "<|im_user|>", "<|im_assistant|>", "<|im_system|>",
                 "<|im_middle|>", "<|tool_calls_section_begin|>", "<|tool_calls_section_end|>",
                 "<|tool_call_begin|>", "<|tool_call_argument_begin|>", "<|tool_call_end|>"]

# Real sentences in many scripts (the vocabulary learns their frequent pieces).
SENTENCES = [
    "The quick brown fox jumps over the lazy dog. It's what they'll say, isn't it? I'd rather we've DONE it.",
    "Tokenizers split text into pieces; byte-pair encoding merges the most frequent pairs first.",
    "Съешь же ещё этих мягких французских булок, да выпей чаю. Москва — столица России.",
    "Ξεσκεπάζω την ψυχοφθόρα βδελυγμία. Η γλώσσα μου έδωσαν ελληνική.",
    "我能吞下玻璃而不伤身体。今天天气很好，我们去公园散步吧！模型的推理速度非常快。",
    "私はガラスを食べられます。それは私を傷つけません。東京は日本の首都です。",
    "나는 유리를 먹을 수 있어요. 그래도 아프지 않아요. 서울은 한국의 수도입니다.",
    "أنا قادر على أكل الزجاج و هذا لا يؤلمني. اللغة العربية جميلة جدا.",
    "אני יכול לאכול זכוכית וזה לא מזיק לי. ירושלים היא עיר עתיקה.",
    "मैं काँच खा सकता हूँ और मुझे उससे कोई चोट नहीं पहुंचती. भारत एक विशाल देश है।",
    "ฉันกินกระจกได้ แต่มันไม่ทำให้ฉันเจ็บ ภาษาไทยไม่มีการเว้นวรรคระหว่างคำ",
    "Tôi có thể ăn thủy tinh mà không hại gì. Việt Nam có nhiều đảo đẹp.",
    "Zwölf Boxkämpfer jagen Viktor quer über den großen Sylter Deich. Ça coûte 15,50 € à Paris.",
    "🙂 😀 👍🏽 👨‍👩‍👧‍👦 🇯🇵 ❤️ 🚀 emoji sequences with ZWJ and skin tones ✨",
    "def encode(self, text: str) -> list[int]:\n    return [self.vocab[t] for t in text.split()]\n",
    "for (int i = 0; i < n; ++i) {\n\tsum += a[i] * b[i];  // dot product\n}\n",
    "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"San Francisco\", \"days\": 3}}",
    "Numbers: 3.14159 2026-11-29 1,234,567 0xDEADBEEF 42nd 1e-9 +49 30 1234567890",
    "   leading spaces\n\n\nmany newlines\r\n\twindows and tabs   \n  trailing    ",
]


def script_words(rng):
    """Random words from character ranges of many scripts."""
    ranges = [(0x61, 0x7A), (0x41, 0x5A), (0x430, 0x44F), (0x3B1, 0x3C9), (0x4E00, 0x9FA5), (0x3041, 0x3096),
              (0x30A1, 0x30FA), (0xAC00, 0xD7A3), (0x627, 0x64A), (0x5D0, 0x5EA), (0x905, 0x939), (0xE01, 0xE2E),
              (0xE40, 0xE4E), (0x1F600, 0x1F64F), (0xE0, 0xFF)]
    lo, hi = rng.choice(ranges)
    return "".join(chr(rng.randint(lo, hi)) for _ in range(rng.randint(1, 8)))


def corpus(n=6000, seed=1):
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        parts = []
        for _ in range(rng.randint(1, 12)):
            r = rng.random()
            if r < 0.55:
                parts.append(rng.choice(SENTENCES))
            elif r < 0.8:
                parts.append(script_words(rng))
            elif r < 0.9:
                parts.append(str(rng.randint(0, 10 ** rng.randint(1, 9))))
            else:
                parts.append(rng.choice([" ", "  ", "\n", "\t", "\r\n", "    ", "\n\n"]))
        out.append(rng.choice(["", " ", "\n"]).join(parts))
    return out


def random_code_point(rng, assigned_only):
    """Mostly BMP, weighted towards letters; `assigned_only` skips what Python's Unicode lacks."""
    import unicodedata
    while True:
        r = rng.random()
        if r < 0.3:
            cp = rng.randint(0x20, 0x7E)
        elif r < 0.4:
            cp = rng.choice([0x09, 0x0A, 0x0D, 0x20, 0x20, 0xA0, 0x3000, 0x2028, 0x85, 0x27, 0x17F])
        elif r < 0.85:
            cp = rng.randint(0x80, 0xFFFF)
        else:
            cp = rng.randint(0x10000, 0x10FFFF)
        if 0xD800 <= cp <= 0xDFFF:
            continue
        if assigned_only and unicodedata.category(chr(cp)) in ("Cn", "Co", "Cs"):
            continue
        return chr(cp)


def random_strings(n, seed, assigned_only=True):
    """Random UTF-8 strings: code points of all planes, mixed with corpus pieces and whitespace."""
    rng = random.Random(seed)
    pieces = corpus(200, seed + 1)
    out = []
    for _ in range(n):
        parts = []
        for _ in range(rng.randint(1, 6)):
            r = rng.random()
            if r < 0.5:
                parts.append("".join(random_code_point(rng, assigned_only) for _ in range(rng.randint(1, 12))))
            elif r < 0.8:
                p = rng.choice(pieces)
                a = rng.randint(0, len(p))
                parts.append(p[a:a + rng.randint(0, 40)])
            else:
                parts.append(rng.choice(["'s", "'S", "'ll", "'LL", "'ſ", "  ", " \n ", "\r\n\r\n", "123456",
                                         "\u0301", "e\u0301", "ǅa", "〇三", "⺀"]))
        out.append("".join(parts))
    return out


def main():
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(CL100K), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=len(GLM_SPECIALS) + 256 + 3000, special_tokens=GLM_SPECIALS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(corpus(), trainer)
    os.makedirs(os.path.join(HERE, "glm_like"), exist_ok=True)
    tok.save(os.path.join(HERE, "glm_like", "tokenizer.json"), pretty=False)

    # tiktoken ranks from the same merges: bytes first, then merged tokens in merge order.
    model = json.loads(tok.to_str())["model"]
    byte_decoder = {}
    n = 0x100
    for b in range(256):
        printable = 0x21 <= b <= 0x7E or 0xA1 <= b <= 0xAC or 0xAE <= b
        byte_decoder[chr(b) if printable else chr(n)] = b
        if not printable:
            n += 1
    to_bytes = lambda s: bytes(byte_decoder[c] for c in s)
    ranks = [bytes([b]) for b in range(256)]
    for merge in model["merges"]:
        a, b = merge if isinstance(merge, list) else merge.split(" ")
        ranks.append(to_bytes(a) + to_bytes(b))
    import base64
    os.makedirs(os.path.join(HERE, "kimi_like"), exist_ok=True)
    with open(os.path.join(HERE, "kimi_like", "tiktoken.model"), "w") as f:
        for rank, token in enumerate(ranks):
            f.write("%s %d\n" % (base64.b64encode(token).decode(), rank))
    decoder = {str(len(ranks) + i): {"content": s, "special": True} for i, s in enumerate(KIMI_SPECIALS)}
    with open(os.path.join(HERE, "kimi_like", "tokenizer_config.json"), "w") as f:
        json.dump({"added_tokens_decoder": decoder}, f, indent=1, ensure_ascii=False)
        f.write("\n")
    print("wrote glm_like/ (%d merges) and kimi_like/ (%d ranks)" % (len(model["merges"]), len(ranks)))


if __name__ == "__main__":
    main()
