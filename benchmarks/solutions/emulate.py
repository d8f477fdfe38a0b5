"""CPU emulation of kernels/common.cuh's data flow, to check its index arithmetic without a GPU.

    python3 benchmarks/solutions/emulate.py [VARIANT ...]

For each variant it reads the ck::Cfg<...> arguments from kernels/<variant>.cu, then for a few tiles
(first, last, and random ones) replays what the kernel does: the weight packing kernel (fragment order),
the cp.async patch loads (zero fill), the per-k-step offsets (koff table or compile-time offsets + t*PLANE),
the mma fragment semantics (a0..a3, b0, b1 in words) and the epilogue's mapping of accumulators to
(channel, row, column). The result is compared with a direct float64 convolution at those outputs.
A "word" is one channel (TF32) or a pair of channels (FP16): words are emulated as vectors of 1 or 2.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np

KERNELS = Path(__file__).resolve().parent / "kernels"
NAMES = ["NB", "CW", "H", "W", "KH", "KW", "S", "P", "COUT", "TH", "TWP", "WM", "WN", "MT", "NT", "CKW", "TAPFAST",
         "F16", "MODE", "CONTIG", "MINB", "ROUNDB", "FLIP"]


def read_cfg(variant: str) -> dict[str, int]:
    """The ck::Cfg<...> arguments of a variant, read through the C preprocessor (its #defines and #if chains)
    with common.cuh left out."""
    import subprocess
    import tempfile

    def flatten(path: Path) -> str:
        out = []
        for line in path.read_text().splitlines():
            m = re.match(r'\s*#include "([^"]+)"', line)
            if m:
                if m.group(1) != "common.cuh":
                    out.append(flatten(KERNELS / m.group(1)))
                continue
            out.append(line)
        return "\n".join(out)

    with tempfile.NamedTemporaryFile("w", suffix=".cpp", delete=False) as f:
        f.write(flatten(KERNELS / f"{variant}.cu"))
    text = subprocess.run(["g++", "-E", "-P", "-x", "c++", f.name], capture_output=True, text=True, check=True).stdout
    body = text[text.index("ck::Cfg<") + len("ck::Cfg<"):]
    body = body[:body.index(">;")]
    vals = []
    for tok in body.split(","):
        tok = tok.strip()
        tok = {"true": "1", "false": "0", "ck::MODE_STORE": "0", "ck::MODE_GELU_MEAN": "1",
               "ck::MODE_GELU_STATS": "2"}.get(tok, tok)
        vals.append(int(tok))
    cfg = dict(zip(NAMES, vals))
    cfg.setdefault("ROUNDB", 0)
    cfg.setdefault("FLIP", 0)
    return cfg


def derive(c: dict[str, int]) -> dict[str, int]:
    d = dict(c)
    d["OH"] = (c["H"] + 2 * c["P"] - c["KH"]) // c["S"] + 1
    d["OW"] = (c["W"] + 2 * c["P"] - c["KW"]) // c["S"] + 1
    d["MTOT"] = c["COUT"] // 16
    d["BN"] = c["TH"] * c["TWP"]
    d["TAPS"] = c["KH"] * c["KW"]
    d["KCW"] = c["CKW"] * d["TAPS"]
    d["KC"] = (d["KCW"] + 7) // 8 * 8
    d["KSTEPS"] = d["KC"] // 8
    d["NCHUNK"] = c["CW"] // c["CKW"]
    d["IH"] = (c["TH"] - 1) * c["S"] + c["KH"]
    d["P4"] = (c["P"] + 3) // 4 * 4
    d["SHIFT"] = d["P4"] - c["P"]
    d["IWL"] = (d["SHIFT"] + (c["TWP"] - 1) * c["S"] + c["KW"] + 3) // 4 * 4
    d["IWS"] = d["IWL"]
    p0 = d["IH"] * d["IWS"]
    d["PLANE"] = p0 + ((8 - p0 % 32) + 32) % 32
    d["PATCHW"] = c["CKW"] * d["PLANE"]
    d["WCHUNKW"] = d["KC"] * c["COUT"]
    d["TX"] = (d["OW"] + c["TWP"] - 1) // c["TWP"]
    d["TY"] = (d["OH"] + c["TH"] - 1) // c["TH"]
    d["NTILES"] = c["NB"] * d["TY"] * d["TX"]
    assert c["WM"] * c["MT"] == d["MTOT"] and c["WN"] * c["NT"] * 8 == d["BN"]
    return d


def decode_j(c, j):
    if c["TAPFAST"]:
        wd, tap = j // c["TAPS"], j % c["TAPS"]
    else:
        tap, wd = j // c["CKW"], j % c["CKW"]
    return wd, tap // c["KW"], tap % c["KW"]


def pack_weights(c, w):
    """Replays pack_weights_kernel. w: conv weight [COUT][CIN][KH][KW] (FLIP: convT weight [CIN][COUT][KH][KW])."""
    per = 2 if c["F16"] else 1
    total = c["NCHUNK"] * c["WCHUNKW"]
    wp = np.zeros((total, per))
    for e in range(total):
        r, lane = e & 3, (e >> 2) & 31
        rest = e >> 7
        m = rest % c["MTOT"]
        rest //= c["MTOT"]
        ks, ch = rest % c["KSTEPS"], rest // c["KSTEPS"]
        g, t = lane >> 2, lane & 3
        co = m * 16 + g + (r & 1) * 8
        j = ks * 8 + t + (r >> 1) * 4
        if j < c["KCW"]:
            wd, kh, kw = decode_j(c, j)
            ciw = ch * c["CKW"] + wd
            for h in range(per):
                ci = ciw * per + h
                if c["FLIP"]:
                    wp[e, h] = w[ci, co, c["KH"] - 1 - kh, c["KW"] - 1 - kw]
                else:
                    wp[e, h] = w[co, ci, kh, kw]
    return wp


def load_patch(c, x, tile, ch):
    """Replays load_step: x as words [N][CW][H][W][per]."""
    per = x.shape[-1]
    patch = np.full((c["PATCHW"], per), np.nan)  # never-written smem is NaN: reading it would show
    tx, ty, n = tile % c["TX"], (tile // c["TX"]) % c["TY"], tile // (c["TX"] * c["TY"])
    r0, c0 = ty * c["TH"] * c["S"] - c["P"], tx * c["TWP"] * c["S"] - c["P4"]
    qw = c["IWL"] // 4
    for wd in range(c["CKW"]):
        for i2 in range(c["IH"]):
            for q in range(qw):
                row, col = r0 + i2, c0 + 4 * q
                valid = 0 <= row < c["H"] and 0 <= col < c["W"]
                dst = wd * c["PLANE"] + i2 * c["IWS"] + 4 * q
                if valid:
                    assert col + 3 < c["W"]
                    patch[dst:dst + 4] = x[n, ch * c["CKW"] + wd, row, col:col + 4]
                else:
                    patch[dst:dst + 4] = 0.0
    return patch


def emulate_tile(c, x, wp, tile):
    """Returns {(n, co, oh, ow): value} for the tile's valid outputs (no bias / epilogue function)."""
    per = x.shape[-1]
    koff = np.zeros(c["KC"], dtype=np.int64)
    for j in range(c["KCW"]):
        wd, kh, kw = decode_j(c, j)
        koff[j] = wd * c["PLANE"] + kh * c["IWS"] + kw
    nwarps = c["WM"] * c["WN"]
    acc = np.zeros((nwarps, c["MT"], c["NT"], 32, 4))
    for ch in range(c["NCHUNK"]):
        patch = load_patch(c, x, tile, ch)
        wchunk = wp[ch * c["WCHUNKW"]:(ch + 1) * c["WCHUNKW"]]
        for warp in range(nwarps):
            wm, wn = warp % c["WM"], warp // c["WM"]
            for ks in range(c["KSTEPS"]):
                # fragments of all 32 lanes
                A = np.zeros((c["MT"], 16, 8, per))
                B = np.zeros((c["NT"], 8, 8, per))
                for lane in range(32):
                    g, t = lane >> 2, lane & 3
                    if c["TAPFAST"]:
                        off0, off1, tP = koff[ks * 8 + t], koff[ks * 8 + t + 4], 0
                    else:
                        j0, j1 = ks * 8, ks * 8 + 4
                        tap0, w0, tap1, w1 = j0 // c["CKW"], j0 % c["CKW"], j1 // c["CKW"], j1 % c["CKW"]
                        off0 = w0 * c["PLANE"] + (tap0 // c["KW"]) * c["IWS"] + tap0 % c["KW"] if j0 < c["KCW"] else 0
                        off1 = w1 * c["PLANE"] + (tap1 // c["KW"]) * c["IWS"] + tap1 % c["KW"] if j1 < c["KCW"] else 0
                        tP = t * c["PLANE"]
                    for ni in range(c["NT"]):
                        p = (wn * c["NT"] + ni) * 8 + g
                        r, cc = p // c["TWP"], p % c["TWP"]
                        poff = r * c["S"] * c["IWS"] + cc * c["S"] + c["SHIFT"] + tP
                        B[ni, t, g] = patch[poff + off0]
                        B[ni, t + 4, g] = patch[poff + off1]
                    for mi in range(c["MT"]):
                        base = ((ks * c["MTOT"] + wm * c["MT"] + mi) * 32 + lane) * 4
                        a = wchunk[base:base + 4]
                        A[mi, g, t], A[mi, g + 8, t], A[mi, g, t + 4], A[mi, g + 8, t + 4] = a[0], a[1], a[2], a[3]
                for mi in range(c["MT"]):
                    for ni in range(c["NT"]):
                        D = np.einsum("mkh,knh->mn", A[mi], B[ni])
                        for lane in range(32):
                            g, t = lane >> 2, lane & 3
                            acc[warp, mi, ni, lane] += [D[g, 2 * t], D[g, 2 * t + 1], D[g + 8, 2 * t], D[g + 8, 2 * t + 1]]
    # epilogue mapping
    tx, ty, n = tile % c["TX"], (tile // c["TX"]) % c["TY"], tile // (c["TX"] * c["TY"])
    oh0, ow0 = ty * c["TH"], tx * c["TWP"]
    res = {}
    for warp in range(nwarps):
        wm, wn = warp % c["WM"], warp // c["WM"]
        for mi in range(c["MT"]):
            for ni in range(c["NT"]):
                for lane in range(32):
                    g, t = lane >> 2, lane & 3
                    co = (wm * c["MT"] + mi) * 16 + g
                    p = (wn * c["NT"] + ni) * 8 + 2 * t
                    oh, ow = oh0 + p // c["TWP"], ow0 + p % c["TWP"]
                    for e in range(4):
                        o_co, o_ow = co + 8 * (e >> 1), ow + (e & 1)
                        if oh < c["OH"] and o_ow < c["OW"]:
                            key = (n, o_co, oh, o_ow)
                            assert key not in res
                            res[key] = acc[warp, mi, ni, lane, e]
    return res


def direct(c, xf, w, key):
    n, co, oh, ow = key
    s = 0.0
    cin = xf.shape[1]
    for ci in range(cin):
        for kh in range(c["KH"]):
            for kw in range(c["KW"]):
                ih, iw = oh * c["S"] - c["P"] + kh, ow * c["S"] - c["P"] + kw
                if 0 <= ih < c["H"] and 0 <= iw < c["W"]:
                    wv = w[ci, co, c["KH"] - 1 - kh, c["KW"] - 1 - kw] if c["FLIP"] else w[co, ci, kh, kw]
                    s += xf[n, ci, ih, iw] * wv
    return s


def check(variant: str, ntiles: int = 3) -> None:
    c = derive(read_cfg(variant))
    per = 2 if c["F16"] else 1
    cin = c["CW"] * per
    rng = np.random.default_rng(0)
    nb = 2  # two images are enough to exercise n; tiles are drawn among the first two images
    xf = rng.random((nb, cin, c["H"], c["W"]))
    w = rng.uniform(-1, 1, (cin, c["COUT"], c["KH"], c["KW"]) if c["FLIP"] else (c["COUT"], cin, c["KH"], c["KW"]))
    x = xf.reshape(nb, c["CW"], per, c["H"], c["W"]).transpose(0, 1, 3, 4, 2).copy()  # words [N][CW][H][W][per]
    wp = pack_weights(c, w)
    per_image = c["TX"] * c["TY"]
    tiles = sorted({0, per_image - 1, per_image, 2 * per_image - 1, int(rng.integers(0, 2 * per_image))})[:ntiles + 2]
    worst, count = 0.0, 0
    for tile in tiles:
        got = emulate_tile(c, x, wp, tile)
        keys = list(got)
        rng.shuffle(keys)
        for key in keys[:40]:
            ref = direct(c, xf, w, key)
            worst = max(worst, abs(got[key] - ref))
            count += 1
        expect = 0
        tx, ty = tile % c["TX"], (tile // c["TX"]) % c["TY"]
        rows = min(c["TH"], c["OH"] - ty * c["TH"])
        cols = min(c["TWP"], c["OW"] - tx * c["TWP"])
        expect = rows * cols * c["COUT"]
        assert len(got) == expect, (len(got), expect)
        assert not any(np.isnan(v) for v in got.values()), "read of never-written shared memory"
    print(f"{variant:16} tiles {tiles} checked {count} outputs, max |err| {worst:.3g}  "
          f"(smem {(((c['KC'] if c['TAPFAST'] else 0) + (1 if c['NCHUNK'] == 1 else 2) * c['WCHUNKW'] + 2 * c['PATCHW']) * 4)} B, "
          f"tiles {c['NTILES']}, KSTEPS {c['KSTEPS']}, NCHUNK {c['NCHUNK']})", flush=True)
    assert worst < 1e-9, f"{variant}: MISMATCH"


if __name__ == "__main__":
    for v in sys.argv[1:] or ["conv67_tf32", "conv50_tf32", "conv50_tf32_t4", "convT19_tf32", "conv56_f16",
                              "conv56_tf32", "conv63_tf32"]:
        check(v)
