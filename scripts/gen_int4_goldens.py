#!/usr/bin/env python3
"""Writes engine/formats/testdata/int4_goldens.json from the real compressed-tensors library.

The goldens pin Tandem's INT4 reference quantizer (engine/formats/weights_ref.cc) to the
`pack-quantized` format (num_bits 4, symmetric, strategy group, group_size 32). Not run in CI:
torch + compressed-tensors is a ~3 GB download and ~5.6 GB installed (docs/weight-formats.md).
To regenerate, in a throwaway virtualenv outside the repository:

    python3 -m venv /tmp/ctvenv
    /tmp/ctvenv/bin/pip install compressed-tensors==0.20.1
    /tmp/ctvenv/bin/python scripts/gen_int4_goldens.py

Each case is a bf16 weight [rows, cols]. The scale comes from the library's own qparams code
(compute_dynamic_scales_and_zp: per-group min/max, what a min-max observer feeds
calculate_qparams), and the packed words from PackedQuantizationCompressor.compress, the path
ModelCompressor takes per module; `dequant` is PackedQuantizationCompressor.decompress. All
arrays are little-endian and base64-encoded: input/scale/dequant as bf16 bits (uint16), packed
as int32.

cols % 32 != 0 is rejected by the library's group quantizer; those cases record the error and
the "extension" golden: the library run on the row zero-padded to a multiple of 32 (scales),
with pack_to_int32 on the truncated quantized row (words). Tandem's quantizer matches both.
"""

import argparse
import base64
import json
import pathlib

import compressed_tensors
import torch
from compressed_tensors.compressors import PackedQuantizationCompressor
from compressed_tensors.compressors.pack_quantized.helpers import pack_to_int32, unpack_from_int32
from compressed_tensors.quantization import QuantizationArgs, QuantizationScheme
from compressed_tensors.quantization.lifecycle.forward import quantize
from compressed_tensors.quantization.utils import compute_dynamic_scales_and_zp

GROUP = 32
ARGS = QuantizationArgs(num_bits=4, type="int", symmetric=True, strategy="group", group_size=GROUP)
SCHEME = QuantizationScheme(targets=["Linear"], weights=ARGS)


def b64(t: torch.Tensor) -> str:
    t = t.contiguous()
    if t.dtype == torch.bfloat16:
        t = t.view(torch.int16)
    return base64.b64encode(t.numpy().tobytes()).decode("ascii")


def qparams(w: torch.Tensor):
    return compute_dynamic_scales_and_zp(value=w, args=ARGS, module=None)


def fp32_quotient_mismatches(w: torch.Tensor, scale: torch.Tensor) -> int:
    """How many codes the fp32-division path (0.20's Triton kernel on CUDA) would change."""
    s = scale.float().repeat_interleave(GROUP, dim=1)[:, : w.shape[1]]
    q_bf16 = torch.clamp((w / scale.repeat_interleave(GROUP, dim=1)[:, : w.shape[1]]).float(), -8, 7).round()
    q_fp32 = torch.clamp(w.float() / s, -8, 7).round()
    return int((q_bf16 != q_fp32).sum())


def library_case(name: str, w: torch.Tensor, with_dequant: bool = True) -> dict:
    scale, zp = qparams(w)
    out = PackedQuantizationCompressor.compress({"weight": w, "weight_scale": scale, "weight_zero_point": zp}, SCHEME)
    assert out["weight_scale"].dtype == torch.bfloat16 and out["weight_packed"].dtype == torch.int32
    case = {
        "name": name,
        "rows": w.shape[0],
        "cols": w.shape[1],
        "library_accepts": True,
        "input": b64(w),
        "packed": b64(out["weight_packed"]),
        "scale": b64(out["weight_scale"]),
        "fp32_quotient_mismatches": fp32_quotient_mismatches(w, out["weight_scale"]),
    }
    if with_dequant:
        back = PackedQuantizationCompressor.decompress(out, SCHEME)["weight"]
        assert back.dtype == torch.bfloat16
        case["dequant"] = b64(back)
    return case


def extension_case(name: str, w: torch.Tensor) -> dict:
    """cols % 32 != 0: record the library's refusal, then the zero-padded equivalent."""
    rows, cols = w.shape
    scale, zp = qparams(torch.nn.functional.pad(w, (0, GROUP - cols % GROUP)))
    error = None
    try:
        PackedQuantizationCompressor.compress({"weight": w, "weight_scale": scale, "weight_zero_point": zp}, SCHEME)
    except ValueError as e:
        error = str(e)
    assert error is not None, "compressed-tensors now accepts cols % 32 != 0: revisit weights_ref.cc"
    padded = torch.nn.functional.pad(w, (0, GROUP - cols % GROUP))
    q = quantize(x=padded, scale=scale, zero_point=zp, args=ARGS, dtype=torch.int8)[:, :cols]
    packed = pack_to_int32(q, 4)
    assert torch.equal(unpack_from_int32(packed, 4, torch.Size([rows, cols])), q)
    return {
        "name": name,
        "rows": rows,
        "cols": cols,
        "library_accepts": False,
        "library_error": error,
        "input": b64(w),
        "packed": b64(packed),
        "scale": b64(scale),
    }


def random_weight(gen: torch.Generator, rows: int, cols: int) -> torch.Tensor:
    # Rows span magnitudes 1e-3..10; a few groups are zero or hold one outlier.
    mag = torch.logspace(-3, 1, rows).unsqueeze(1)
    w = torch.randn(rows, cols, generator=gen) * mag
    if cols >= 2 * GROUP and rows >= 2:
        w[0, GROUP : 2 * GROUP] = 0.0
        w[1, 3] = 50.0 * mag[1, 0]
    return w.to(torch.bfloat16)


def tie_weight(rows: int) -> torch.Tensor:
    """Values at (m + 0.5) * scale and +-amax, to exercise clamp and round-half-even."""
    scales = [1.0, 0.375, 1.25, 0.046875, 3.0]  # bf16-exact, so amax = 7.5 * scale is exact
    w = torch.zeros(rows, 64)
    for r in range(rows):
        scale = scales[r % len(scales)]
        amax = 7.5 * scale
        halves = torch.arange(-7.5, 7.5, 0.5)[: GROUP - 2]
        w[r, :GROUP] = torch.cat([torch.tensor([amax, -amax]), halves * scale])
        w[r, GROUP:] = torch.linspace(-amax, amax, GROUP)
    return w.to(torch.bfloat16)


def hand_case() -> dict:
    """[1, 32] with amax 7.5, so scale is exactly 1 and q = round-half-even(clamp(w))."""
    w = torch.tensor([[7.5, -7.5, 2.5, 3.5, -2.5, 0.5, -0.5, 1.5] + [0.0] * 8 + [1.0] * 16]).to(torch.bfloat16)
    case = library_case("hand_scale_one", w)
    # q = 7 -8 2 4 -2 0 0 2 | 0 x8 | 1 x16, nibbles q + 8 little nibble first.
    expected_words = [0xA886CA0F, 0x88888888, 0x99999999, 0x99999999]
    packed = torch.frombuffer(bytearray(base64.b64decode(case["packed"])), dtype=torch.int32)
    assert [int(x) & 0xFFFFFFFF for x in packed] == expected_words, [hex(int(x) & 0xFFFFFFFF) for x in packed]
    return case


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    root = pathlib.Path(__file__).resolve().parent.parent
    parser.add_argument("--out", default=root / "engine/formats/testdata/int4_goldens.json", type=pathlib.Path)
    args = parser.parse_args()

    gen = torch.Generator().manual_seed(20240607)
    cases = [hand_case(), library_case("ties_4x64", tie_weight(4))]
    for rows, cols in [(7, 32), (16, 64), (3, 96), (1, 32)]:
        cases.append(library_case(f"random_{rows}x{cols}", random_weight(gen, rows, cols)))
    cases.append(library_case("random_128x256", random_weight(gen, 128, 256), with_dequant=False))
    for rows, cols in [(5, 40), (3, 36), (2, 7)]:
        cases.append(extension_case(f"padded_{rows}x{cols}", random_weight(gen, rows, cols)))

    doc = {
        "generator": "scripts/gen_int4_goldens.py",
        "library": f"compressed-tensors {compressed_tensors.__version__}",
        "torch": torch.__version__,
        "scheme": ARGS.model_dump(mode="json"),
        "encoding": "base64 little-endian; input/scale/dequant bf16 bits, packed int32",
        "cases": cases,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {args.out} ({args.out.stat().st_size} bytes, {len(cases)} cases)")


if __name__ == "__main__":
    main()
