#!/usr/bin/python3
"""Independent NumPy reference for kvserve's GGUF quantization formats.

Implements the block formats F32, F16, BF16, Q8_0, Q4_0, Q5_0, Q4_1, IQ4_NL,
IQ4_XS, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K and Q8_K (quantize + dequantize) as
llama.cpp's reference quantizers define them (IQ4_NL / IQ4_XS: as
quantize_iq4_nl / quantize_iq4_xs without an importance matrix),
vectorised over all blocks of an input at once. Every float operation is done
in float32 in the reference algorithm's order (sums are sequential over the
elements of a block, never pairwise), so the bytes can be compared exactly
with kvserve's C++ quantizers (src/kernels/quant_ref*.cc), which the
`quant_test.cc` ctest does.

Usage:
  quant_ref.py batch MANIFEST
      Each MANIFEST line: TYPE N_PER_ROW IN.f32 OUT.bin OUT_DEQ.f32
      Reads rows of N_PER_ROW little-endian float32 values, writes the
      quantized rows and the float32 values the quantized rows decode to.
  quant_ref.py selftest
      Round-trip error sanity checks on random data.
"""

import sys

import numpy as np

F32 = np.float32


# ---------------------------------------------------------------- helpers

def f16_bits(a):
    """float32 -> IEEE half bits, round to nearest even."""
    return np.asarray(a, dtype=F32).astype(np.float16).view(np.uint16)


def from_f16_bits(b):
    return np.asarray(b, dtype=np.uint16).view(np.float16).astype(F32)


def bf16_bits(a):
    """float32 -> bfloat16 bits, round to nearest even, NaN kept quiet."""
    u = np.asarray(a, dtype=F32).view(np.uint32)
    is_nan = (u & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000)
    lsb = (u >> np.uint32(16)) & np.uint32(1)
    rounded = (u + np.uint32(0x7FFF) + lsb) >> np.uint32(16)
    quiet = (u >> np.uint32(16)) | np.uint32(64)
    return np.where(is_nan, quiet, rounded).astype(np.uint16)


def from_bf16_bits(b):
    return (np.asarray(b, dtype=np.uint16).astype(np.uint32) << np.uint32(16)).view(F32)


def rint_magic(v):
    """Round to nearest, ties to even, the way the format's reference does:
    add 1.5 * 2^23 in float32 and read the low mantissa bits back."""
    t = (np.asarray(v, dtype=F32) + F32(12582912.0)).astype(F32)
    return (t.view(np.int32) & 0x007FFFFF) - 0x00400000


def round_away(v):
    """C roundf: nearest integer, halfway cases away from zero (exact)."""
    t = np.trunc(v)
    frac = np.abs(v - t)  # exact for float32
    return t + np.where(frac >= F32(0.5), np.sign(v), F32(0)).astype(F32)


def seqsum(t):
    """Sequential float32 sum over the last axis (left to right)."""
    acc = np.zeros(t.shape[:-1], dtype=F32)
    for i in range(t.shape[-1]):
        acc = (acc + t[..., i]).astype(F32)
    return acc


def signed_absmax(x):
    """Per row: (max |x|, the first element attaining it, or +0 if all 0)."""
    ax = np.abs(x)
    idx = np.argmax(ax, axis=-1)
    amax = np.take_along_axis(ax, idx[..., None], axis=-1)[..., 0]
    val = np.take_along_axis(x, idx[..., None], axis=-1)[..., 0]
    return amax, np.where(amax > 0, val, F32(0)).astype(F32)


def safe(den):
    """Denominator with zeros replaced by 1 (results masked afterwards)."""
    return np.where(den != 0, den, F32(1)).astype(F32)


# ---------------------------------------------------------------- Q8_0

Q8_0 = np.dtype([("d", "<u2"), ("qs", "i1", 32)])
Q4_0 = np.dtype([("d", "<u2"), ("qs", "u1", 16)])
Q4_K = np.dtype([("d", "<u2"), ("dmin", "<u2"), ("scales", "u1", 12), ("qs", "u1", 128)])
Q5_K = np.dtype([("d", "<u2"), ("dmin", "<u2"), ("scales", "u1", 12), ("qh", "u1", 32), ("qs", "u1", 128)])
Q6_K = np.dtype([("ql", "u1", 128), ("qh", "u1", 64), ("scales", "i1", 16), ("d", "<u2")])
Q8_K = np.dtype([("d", "<f4"), ("qs", "i1", 256), ("bsums", "<i2", 16)])
assert (Q8_0.itemsize, Q4_0.itemsize, Q4_K.itemsize, Q5_K.itemsize, Q6_K.itemsize, Q8_K.itemsize) == \
    (34, 18, 144, 176, 210, 292)


def quant_q8_0(x):
    x = x.reshape(-1, 32)
    amax = np.abs(x).max(axis=1)
    d = (amax / F32(127)).astype(F32)
    inv = np.where(d != 0, F32(1) / safe(d), F32(0)).astype(F32)
    out = np.zeros(len(x), Q8_0)
    out["d"] = f16_bits(d)
    out["qs"] = round_away((x * inv[:, None]).astype(F32)).astype(np.int8)
    return out


def dequant_q8_0(b):
    d = from_f16_bits(b["d"])
    return (b["qs"].astype(F32) * d[:, None]).reshape(-1)


# ---------------------------------------------------------------- Q4_0

def quant_q4_0(x):
    x = x.reshape(-1, 32)
    _, vmax = signed_absmax(x)
    d = (vmax / F32(-8)).astype(F32)
    inv = np.where(d != 0, F32(1) / safe(d), F32(0)).astype(F32)
    v = ((x * inv[:, None]).astype(F32) + F32(8.5)).astype(F32)
    q = np.minimum(np.trunc(v).astype(np.int32), 15)
    out = np.zeros(len(x), Q4_0)
    out["d"] = f16_bits(d)
    out["qs"] = (q[:, :16] | (q[:, 16:] << 4)).astype(np.uint8)
    return out


def dequant_q4_0(b):
    d = from_f16_bits(b["d"])
    q = np.concatenate([b["qs"] & 15, b["qs"] >> 4], axis=1).astype(np.int32) - 8
    return (q.astype(F32) * d[:, None]).reshape(-1)


# ---------------------------------------------------------------- Q8_K

def quant_q8_k(x):
    x = x.reshape(-1, 256)
    amax, vmax = signed_absmax(x)
    live = amax != 0
    iscale = np.where(live, F32(-127) / safe(vmax), F32(0)).astype(F32)
    q = np.minimum(rint_magic(iscale[:, None] * x), 127)
    q = np.where(live[:, None], q, 0)
    out = np.zeros(len(x), Q8_K)
    out["qs"] = q.astype(np.int8)
    out["bsums"] = q.reshape(-1, 16, 16).sum(axis=2).astype(np.int16)
    out["d"] = np.where(live, F32(1) / safe(iscale), F32(0))
    return out


def dequant_q8_k(b):
    return (b["d"][:, None] * b["qs"].astype(F32)).reshape(-1)


# ---------------------------------------------------------------- Q6_K

def fit_symmetric(x, nmax):
    """Per row of x (G, n): scale and codes L in [0, 2*nmax) with
    x ~ scale * (L - nmax), choosing among 19 inverse scales the one that
    maximises (sum w x l)^2 / sum w l^2 with w = x^2."""
    amax, vmax = signed_absmax(x)
    dead = amax < F32(1e-15)
    den = safe(vmax)
    w = (x * x).astype(F32)
    wx = (w * x).astype(F32)

    def trial(iscale):
        l = np.clip(rint_magic(iscale[:, None] * x), -nmax, nmax - 1)
        fl = l.astype(F32)
        return l, seqsum(wx * fl), seqsum((w * fl).astype(F32) * fl)

    l, sumlx, suml2 = trial((F32(-nmax) / den).astype(F32))
    codes = l + nmax
    scale = np.where(suml2 != 0, sumlx / safe(suml2), F32(0)).astype(F32)
    best = (scale * sumlx).astype(F32)
    for step in range(-9, 10):
        if step == 0:
            continue
        iscale = (-(F32(nmax) + F32(0.1) * F32(step)) / den).astype(F32)
        l, sumlx, suml2 = trial(iscale)
        win = (suml2 > 0) & ((sumlx * sumlx).astype(F32) > (best * suml2).astype(F32))
        codes = np.where(win[:, None], l + nmax, codes)
        scale = np.where(win, sumlx / safe(suml2), scale).astype(F32)
        best = np.where(win, scale * sumlx, best).astype(F32)
    codes = np.where(dead[:, None], 0, codes)
    scale = np.where(dead, F32(0), scale).astype(F32)
    return scale, codes


def quant_q6_k(x):
    nb = x.size // 256
    xs = x.reshape(nb, 16, 16)
    sub_scale, codes = fit_symmetric(xs.reshape(-1, 16), 32)
    sub_scale = sub_scale.reshape(nb, 16)
    codes = codes.reshape(nb, 16, 16)
    amax, vmax = signed_absmax(sub_scale)
    dead = amax < F32(1e-15)
    iscale = (F32(-128) / safe(vmax)).astype(F32)
    d16 = f16_bits(F32(1) / iscale)
    sc = np.minimum(rint_magic(iscale[:, None] * sub_scale), 127)
    dsub = (from_f16_bits(d16)[:, None] * sc.astype(F32)).astype(F32)
    with_scale = dsub != 0
    recoded = np.clip(rint_magic(xs / safe(dsub)[:, :, None]), -32, 31) + 32
    codes = np.where(with_scale[:, :, None], recoded, codes).reshape(nb, 2, 4, 32)
    # codes[:, h, k, l] is element 128h + 32k + l
    q1, q2, q3, q4 = (codes[:, :, k, :] for k in range(4))  # each (nb, 2, 32)
    out = np.zeros(nb, Q6_K)
    ql = np.concatenate([(q1 & 15) | ((q3 & 15) << 4), (q2 & 15) | ((q4 & 15) << 4)], axis=2)
    qh = (q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) | ((q4 >> 4) << 6)
    out["ql"] = np.where(dead[:, None], 0, ql.reshape(nb, 128))
    out["qh"] = np.where(dead[:, None], 0, qh.reshape(nb, 64))
    out["scales"] = np.where(dead[:, None], 0, sc).astype(np.int8)
    out["d"] = np.where(dead, 0, d16)
    return out


def dequant_q6_k(b):
    nb = len(b)
    ql = b["ql"].reshape(nb, 2, 64).astype(np.int32)
    qh = b["qh"].reshape(nb, 2, 32).astype(np.int32)
    lo = [ql[:, :, :32] & 15, ql[:, :, 32:] & 15, ql[:, :, :32] >> 4, ql[:, :, 32:] >> 4]
    q = np.stack([lo[k] | (((qh >> (2 * k)) & 3) << 4) for k in range(4)], axis=2) - 32
    q = q.reshape(nb, 256)  # element order 128h + 32k + l
    sc = np.repeat(b["scales"].astype(F32), 16, axis=1)  # one scale per 16 elements
    d = from_f16_bits(b["d"])
    return ((d[:, None] * sc).astype(F32) * q.astype(F32)).reshape(-1)


# ---------------------------------------------------------------- Q4_K

def fit_affine(x, w, nmax, rmin, rdelta, nstep, mad=False):
    """Per row of x (G, n): scale, offset m >= 0 and codes L in [0, nmax] with
    x ~ scale * L - m, searching nstep+1 inverse scales and keeping the
    weighted least-squares fit of least weighted squared error (absolute
    error with mad)."""
    g, n = x.shape
    lo = x[:, 0].copy()
    hi = x[:, 0].copy()
    sum_w = w[:, 0].copy()
    sum_x = (sum_w * x[:, 0]).astype(F32)
    for i in range(1, n):
        lo = np.where(x[:, i] < lo, x[:, i], lo)
        hi = np.where(x[:, i] > hi, x[:, i], hi)
        sum_w = (sum_w + w[:, i]).astype(F32)
        sum_x = (sum_x + (w[:, i] * x[:, i]).astype(F32)).astype(F32)
    lo = np.where(lo > 0, F32(0), lo).astype(F32)
    flat = hi == lo

    def codes_for(iscale, off):
        v = (iscale[:, None] * (x - off[:, None]).astype(F32)).astype(F32)
        return np.clip(rint_magic(v), 0, nmax)

    def werr(scale, off, codes):
        diff = ((scale[:, None] * codes.astype(F32)).astype(F32) + off[:, None]).astype(F32) - x
        e = np.abs(diff) if mad else (diff * diff).astype(F32)
        return seqsum((w * e).astype(F32))

    iscale = (F32(nmax) / safe(hi - lo)).astype(F32)
    scale = (F32(1) / iscale).astype(F32)
    codes = codes_for(iscale, lo)
    best = werr(scale, lo, codes)
    for step in range(nstep + 1):
        iscale = (((F32(rmin) + F32(rdelta) * F32(step)).astype(F32) + F32(nmax)).astype(F32)
                  / safe(hi - lo)).astype(F32)
        trial = codes_for(iscale, lo)
        fl = trial.astype(F32)
        wl = (w * fl).astype(F32)
        sum_l = seqsum(wl)
        sum_l2 = seqsum((wl * fl).astype(F32))
        sum_xl = seqsum((wl * x).astype(F32))
        det = ((sum_w * sum_l2).astype(F32) - (sum_l * sum_l).astype(F32)).astype(F32)
        ok = det > 0
        t_scale = (((sum_w * sum_xl).astype(F32) - (sum_x * sum_l).astype(F32)) / safe(det)).astype(F32)
        t_off = (((sum_l2 * sum_x).astype(F32) - (sum_l * sum_xl).astype(F32)) / safe(det)).astype(F32)
        clamp = t_off > 0
        t_off = np.where(clamp, F32(0), t_off).astype(F32)
        t_scale = np.where(clamp, sum_xl / safe(sum_l2), t_scale).astype(F32)
        err = werr(t_scale, t_off, trial)
        win = ok & (err < best) & ~flat
        codes = np.where(win[:, None], trial, codes)
        best = np.where(win, err, best)
        scale = np.where(win, t_scale, scale)
        lo = np.where(win, t_off, lo)
    codes = np.where(flat[:, None], 0, codes)
    scale = np.where(flat, F32(0), scale).astype(F32)
    return scale, (-lo).astype(F32), codes


def pack_scale_min_k4(ls, lm):
    """(nb, 8) 6-bit scales and mins -> the 12 packed bytes of a Q4_K block."""
    out = np.zeros((len(ls), 12), np.int32)
    out[:, 0:4] = ls[:, 0:4] | ((ls[:, 4:8] >> 4) << 6)
    out[:, 4:8] = lm[:, 0:4] | ((lm[:, 4:8] >> 4) << 6)
    out[:, 8:12] = (ls[:, 4:8] & 15) | ((lm[:, 4:8] & 15) << 4)
    return out.astype(np.uint8)


def unpack_scale_min_k4(b):
    b = b.astype(np.int32)
    sc = np.concatenate([b[:, 0:4] & 63, (b[:, 8:12] & 15) | ((b[:, 0:4] >> 6) << 4)], axis=1)
    mn = np.concatenate([b[:, 4:8] & 63, (b[:, 8:12] >> 4) | ((b[:, 4:8] >> 6) << 4)], axis=1)
    return sc, mn


def quant_affine_k(x, nmax, rmin, nstep, block_dtype):
    """Q4_K (nmax 15) and Q5_K (nmax 31): per super-block of 256, affine fits
    of the 8 sub-blocks, 6-bit scales and mins, f16 d/dmin, and the codes
    re-quantized against the stored scales. Returns (blocks, codes (nb, 8, 32))."""
    nb = x.size // 256
    xs = x.reshape(nb, 8, 32)
    av = np.sqrt(seqsum((xs * xs).astype(F32)) / F32(32)).astype(F32)
    w = (av[:, :, None] + np.abs(xs)).astype(F32)
    scale, mins, codes = fit_affine(xs.reshape(-1, 32), w.reshape(-1, 32), nmax, rmin, 0.1, nstep)
    scale = scale.reshape(nb, 8)
    mins = mins.reshape(nb, 8)
    codes = codes.reshape(nb, 8, 32)
    top_s = scale.max(axis=1)
    top_s = np.where(top_s > 0, top_s, F32(0)).astype(F32)
    top_m = mins.max(axis=1)
    top_m = np.where(top_m > 0, top_m, F32(0)).astype(F32)
    inv_s = np.where(top_s > 0, F32(63) / safe(top_s), F32(0)).astype(F32)
    inv_m = np.where(top_m > 0, F32(63) / safe(top_m), F32(0)).astype(F32)
    ls = np.minimum(rint_magic(inv_s[:, None] * scale) & 0xFF, 63)
    lm = np.minimum(rint_magic(inv_m[:, None] * mins) & 0xFF, 63)
    out = np.zeros(nb, block_dtype)
    out["scales"] = pack_scale_min_k4(ls, lm)
    out["d"] = f16_bits(top_s / F32(63))
    out["dmin"] = f16_bits(top_m / F32(63))
    sc6, m6 = unpack_scale_min_k4(out["scales"])
    dsub = (from_f16_bits(out["d"])[:, None] * sc6.astype(F32)).astype(F32)
    msub = (from_f16_bits(out["dmin"])[:, None] * m6.astype(F32)).astype(F32)
    v = ((xs + msub[:, :, None]).astype(F32) / safe(dsub)[:, :, None]).astype(F32)
    recoded = np.clip(rint_magic(v), 0, nmax)
    codes = np.where((dsub != 0)[:, :, None], recoded, codes)
    return out, codes


def quant_q4_k(x):
    out, codes = quant_affine_k(x, 15, -1.0, 20, Q4_K)
    codes = codes.reshape(len(out), 4, 2, 32)
    out["qs"] = (codes[:, :, 0, :] | (codes[:, :, 1, :] << 4)).reshape(len(out), 128).astype(np.uint8)
    return out


def quant_q5_k(x):
    out, codes = quant_affine_k(x, 31, -0.5, 15, Q5_K)
    nb = len(out)
    c = codes.reshape(nb, 4, 2, 32)
    out["qs"] = ((c[:, :, 0, :] & 15) | ((c[:, :, 1, :] & 15) << 4)).reshape(nb, 128).astype(np.uint8)
    # Bit s of qh[l] is the 5th bit of element 32s + l.
    hi = (codes >> 4).astype(np.int32)  # (nb, 8, 32)
    qh = np.zeros((nb, 32), np.int32)
    for sub in range(8):
        qh |= hi[:, sub, :] << sub
    out["qh"] = qh.astype(np.uint8)
    return out


def dequant_q4_k(b):
    nb = len(b)
    sc6, m6 = unpack_scale_min_k4(b["scales"])
    dsub = (from_f16_bits(b["d"])[:, None] * sc6.astype(F32)).astype(F32)
    msub = (from_f16_bits(b["dmin"])[:, None] * m6.astype(F32)).astype(F32)
    qs = b["qs"].reshape(nb, 4, 32)
    q = np.stack([qs & 15, qs >> 4], axis=2).reshape(nb, 8, 32).astype(F32)
    return ((dsub[:, :, None] * q).astype(F32) - msub[:, :, None]).astype(F32).reshape(-1)


def dequant_q5_k(b):
    nb = len(b)
    sc6, m6 = unpack_scale_min_k4(b["scales"])
    dsub = (from_f16_bits(b["d"])[:, None] * sc6.astype(F32)).astype(F32)
    msub = (from_f16_bits(b["dmin"])[:, None] * m6.astype(F32)).astype(F32)
    qs = b["qs"].reshape(nb, 4, 32)
    lo = np.stack([qs & 15, qs >> 4], axis=2).reshape(nb, 8, 32).astype(np.int32)
    qh = b["qh"].astype(np.int32)  # (nb, 32)
    hi = np.stack([(qh >> sub) & 1 for sub in range(8)], axis=1)  # (nb, 8, 32)
    q = (lo + 16 * hi).astype(F32)
    return ((dsub[:, :, None] * q).astype(F32) - msub[:, :, None]).astype(F32).reshape(-1)


# ---------------------------------------------------------------- Q5_0, Q4_1

Q5_0 = np.dtype([("d", "<u2"), ("qh", "<u4"), ("qs", "u1", 16)])
Q4_1 = np.dtype([("d", "<u2"), ("m", "<u2"), ("qs", "u1", 16)])
IQ4_NL = np.dtype([("d", "<u2"), ("qs", "u1", 16)])
IQ4_XS = np.dtype([("d", "<u2"), ("scales_h", "<u2"), ("scales_l", "u1", 4), ("qs", "u1", 128)])
Q3_K = np.dtype([("hmask", "u1", 32), ("qs", "u1", 64), ("scales", "u1", 12), ("d", "<u2")])
Q2_K = np.dtype([("scales", "u1", 16), ("qs", "u1", 64), ("d", "<u2"), ("dmin", "<u2")])
assert (Q5_0.itemsize, Q4_1.itemsize, IQ4_NL.itemsize, IQ4_XS.itemsize, Q3_K.itemsize, Q2_K.itemsize) == \
    (22, 20, 18, 136, 110, 84)


def pack_nibbles(q):
    """(G, 32) codes -> (G, 16) bytes: element j low nibble, j + 16 high."""
    return (q[:, :16] | (q[:, 16:] << 4)).astype(np.uint8)


def unpack_nibbles(qs):
    return np.concatenate([qs & 15, qs >> 4], axis=1).astype(np.int32)


def quant_q5_0(x):
    x = x.reshape(-1, 32)
    _, vmax = signed_absmax(x)
    d = (vmax / F32(-16)).astype(F32)
    inv = np.where(d != 0, F32(1) / safe(d), F32(0)).astype(F32)
    v = ((x * inv[:, None]).astype(F32) + F32(16.5)).astype(F32)
    q = np.minimum(np.trunc(v).astype(np.int32), 31)
    out = np.zeros(len(x), Q5_0)
    out["d"] = f16_bits(d)
    out["qs"] = pack_nibbles(q & 15)
    out["qh"] = (((q >> 4) & 1).astype(np.uint64) << np.arange(32, dtype=np.uint64)).sum(axis=1).astype(np.uint32)
    return out


def dequant_q5_0(b):
    hi = ((b["qh"][:, None].astype(np.int64) >> np.arange(32)) & 1).astype(np.int32)
    q = unpack_nibbles(b["qs"]) | (hi << 4)
    return ((q - 16).astype(F32) * from_f16_bits(b["d"])[:, None]).reshape(-1)


def quant_q4_1(x):
    x = x.reshape(-1, 32)
    lo = x.min(axis=1)
    hi = x.max(axis=1)
    d = ((hi - lo).astype(F32) / F32(15)).astype(F32)
    inv = np.where(d != 0, F32(1) / safe(d), F32(0)).astype(F32)
    v = (((x - lo[:, None]).astype(F32) * inv[:, None]).astype(F32) + F32(0.5)).astype(F32)
    q = np.minimum(np.trunc(v).astype(np.int32), 15)
    out = np.zeros(len(x), Q4_1)
    out["d"] = f16_bits(d)
    out["m"] = f16_bits(lo)
    out["qs"] = pack_nibbles(q)
    return out


def dequant_q4_1(b):
    q = unpack_nibbles(b["qs"]).astype(F32)
    return ((q * from_f16_bits(b["d"])[:, None]).astype(F32) + from_f16_bits(b["m"])[:, None]).reshape(-1)


# ---------------------------------------------------------------- IQ4_NL, IQ4_XS

IQ4_VALUES = np.array([-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113], dtype=F32)


def iq4_index(v):
    """Index of the grid value nearest to v (float32), the lower on a tie."""
    v = np.asarray(v, dtype=F32)
    mu = np.clip(np.searchsorted(IQ4_VALUES, v, side="right"), 1, 15)
    below = (v - IQ4_VALUES[mu - 1]).astype(F32) < (IQ4_VALUES[mu] - v).astype(F32)
    idx = np.where(below, mu - 1, mu)
    idx = np.where(v <= IQ4_VALUES[0], 0, idx)
    return np.where(v >= IQ4_VALUES[15], 15, idx)


def fit_iq4(x):
    """Per row of x (G, 32): the weighted (w = x^2) least-squares scale over
    the IQ4 grid, the best of 16 starting inverse scales; 0 for a row whose
    largest magnitude is below 1e-15."""
    amax, vmax = signed_absmax(x)
    dead = amax < F32(1e-15)
    den = safe(vmax)
    w = (x * x).astype(F32)

    def trial(iscale):
        q = IQ4_VALUES[iq4_index((iscale[:, None] * x).astype(F32))]
        wq = (w * q).astype(F32)
        return seqsum((wq * x).astype(F32)), seqsum((wq * q).astype(F32))

    d = ((-den) / F32(-127)).astype(F32)
    sumqx, sumq2 = trial((F32(1) / d).astype(F32))
    d = np.where(sumq2 > 0, sumqx / safe(sumq2), F32(0)).astype(F32)
    best = (d * sumqx).astype(F32)
    for itry in range(-7, 8):
        sumqx, sumq2 = trial((F32(itry - 127) / den).astype(F32))
        win = (sumq2 > 0) & ((sumqx * sumqx).astype(F32) > (best * sumq2).astype(F32))
        d = np.where(win, sumqx / safe(sumq2), d).astype(F32)
        best = np.where(win, d * sumqx, best).astype(F32)
    return np.where(dead, F32(0), d).astype(F32)


def quant_iq4_nl(x):
    x = x.reshape(-1, 32)
    d = fit_iq4(x)
    inv = np.where(d != 0, F32(1) / safe(d), F32(0)).astype(F32)
    out = np.zeros(len(x), IQ4_NL)
    out["d"] = f16_bits(d)
    out["qs"] = pack_nibbles(iq4_index((inv[:, None] * x).astype(F32)))
    return out


def dequant_iq4_nl(b):
    q = IQ4_VALUES[unpack_nibbles(b["qs"])]
    return (from_f16_bits(b["d"])[:, None] * q).astype(F32).reshape(-1)


def quant_iq4_xs(x):
    nb = x.size // 256
    xs = x.reshape(nb, 8, 32)
    sub = fit_iq4(xs.reshape(-1, 32)).reshape(nb, 8)
    _, top = signed_absmax(sub)
    d = ((-top) / F32(32)).astype(F32)
    inv = np.where(d != 0, F32(1) / safe(d), F32(0)).astype(F32)
    ls = np.clip(rint_magic(inv[:, None] * sub), -32, 31)
    dl = (d[:, None] * ls.astype(F32)).astype(F32)
    idl = np.where(dl != 0, F32(1) / safe(dl), F32(0)).astype(F32)
    idx = iq4_index((idl[:, :, None] * xs).astype(F32))
    ls = ls + 32
    out = np.zeros(nb, IQ4_XS)
    out["d"] = f16_bits(d)
    out["scales_l"] = ((ls[:, 0::2] & 15) | ((ls[:, 1::2] & 15) << 4)).astype(np.uint8)
    out["scales_h"] = ((ls >> 4) << (2 * np.arange(8))).sum(axis=1).astype(np.uint16)
    out["qs"] = pack_nibbles(idx.reshape(-1, 32)).reshape(nb, 128)
    return out


def dequant_iq4_xs(b):
    nb = len(b)
    ls_l = np.stack([b["scales_l"] & 15, b["scales_l"] >> 4], axis=2).reshape(nb, 8).astype(np.int32)
    ls_h = (b["scales_h"][:, None].astype(np.int32) >> (2 * np.arange(8))) & 3
    dl = (from_f16_bits(b["d"])[:, None] * ((ls_l | (ls_h << 4)) - 32).astype(F32)).astype(F32)
    q = IQ4_VALUES[unpack_nibbles(b["qs"].reshape(-1, 16))].reshape(nb, 8, 32)
    return (dl[:, :, None] * q).astype(F32).reshape(-1)


# ---------------------------------------------------------------- Q3_K, Q2_K

def pack_2bit(L):
    """(nb, 256) codes -> (nb, 64): element 128h + 32k + l at bits 2k of
    byte 32h + l."""
    c = (L & 3).reshape(len(L), 2, 4, 32)
    return (c[:, :, 0] | (c[:, :, 1] << 2) | (c[:, :, 2] << 4) | (c[:, :, 3] << 6)).reshape(len(L), 64).astype(np.uint8)


def unpack_2bit(qs):
    q = qs.reshape(len(qs), 2, 1, 32).astype(np.int32)
    return ((q >> (2 * np.arange(4))[None, None, :, None]) & 3).reshape(len(qs), 256)


def fit_q3(x):
    """Per row of x (G, 16): 3-bit symmetric codes L in [0, 8) for L - 4 and
    the scale, refined by up to 5 passes of single-code moves that raise
    (sum w x l)^2 / sum w l^2 (w = x^2)."""
    amax, vmax = signed_absmax(x)
    dead = amax < F32(1e-15)
    w = (x * x).astype(F32)
    wx = (w * x).astype(F32)
    L = np.clip(rint_magic((F32(-4) / safe(vmax))[:, None] * x), -4, 3)
    fl = L.astype(F32)
    sumlx = seqsum((wx * fl).astype(F32))
    suml2 = seqsum(((w * fl).astype(F32) * fl).astype(F32))
    for _ in range(5):  # a pass without changes leaves the state as it was
        for i in range(16):
            li = L[:, i].astype(F32)
            slx = (sumlx - (wx[:, i] * li).astype(F32)).astype(F32)
            sl2 = (suml2 - ((w[:, i] * li).astype(F32) * li).astype(F32)).astype(F32)
            nl = np.clip(rint_magic(((x[:, i] * sl2).astype(F32) / safe(slx)).astype(F32)), -4, 3)
            fn = nl.astype(F32)
            slx2 = (slx + (wx[:, i] * fn).astype(F32)).astype(F32)
            sl22 = (sl2 + ((w[:, i] * fn).astype(F32) * fn).astype(F32)).astype(F32)
            ok = (slx > 0) & (nl != L[:, i]) & (sl22 > 0) & \
                (((slx2 * slx2).astype(F32) * suml2).astype(F32) > ((sumlx * sumlx).astype(F32) * sl22).astype(F32))
            L[:, i] = np.where(ok, nl, L[:, i])
            sumlx = np.where(ok, slx2, sumlx).astype(F32)
            suml2 = np.where(ok, sl22, suml2).astype(F32)
    scale = np.where(suml2 > 0, sumlx / safe(suml2), F32(0)).astype(F32)
    return np.where(dead, F32(0), scale).astype(F32), np.where(dead[:, None], 0, L + 4)


def q3k_scales(b):
    """(nb, 12) packed bytes -> (nb, 16) 6-bit scales (before the -32)."""
    b = b.astype(np.int32)
    lo = np.concatenate([b[:, 0:8] & 15, b[:, 0:8] >> 4], axis=1)
    s = np.arange(16)
    hi = (b[:, 8 + s % 4] >> (2 * (s // 4))) & 3
    return lo | (hi << 4)


def quant_q3_k(x):
    nb = x.size // 256
    xs = x.reshape(nb, 16, 16)
    sub, L = fit_q3(xs.reshape(-1, 16))
    sub = sub.reshape(nb, 16)
    L = L.reshape(nb, 16, 16)
    _, top = signed_absmax(sub)
    live = top != 0
    iscale = (F32(-32) / safe(top)).astype(F32)
    l = ((rint_magic(iscale[:, None] * sub) + 128) & 255) - 128  # the int8 wrap
    l = np.where(live[:, None], np.clip(l, -32, 31) + 32, 0)
    sc = np.zeros((nb, 12), np.int32)
    sc[:, 0:8] = (l[:, 0:8] & 15) | ((l[:, 8:16] & 15) << 4)
    for s in range(16):
        sc[:, 8 + s % 4] |= (l[:, s] >> 4) << (2 * (s // 4))
    out = np.zeros(nb, Q3_K)
    out["scales"] = sc.astype(np.uint8)
    out["d"] = np.where(live, f16_bits(F32(1) / safe(iscale)), f16_bits(F32(0)))
    dsub = (from_f16_bits(out["d"])[:, None] * (q3k_scales(out["scales"]) - 32).astype(F32)).astype(F32)
    recoded = np.clip(rint_magic((xs / safe(dsub)[:, :, None]).astype(F32)), -4, 3) + 4
    L = np.where((dsub != 0)[:, :, None], recoded, L).reshape(nb, 256)
    high = L > 3
    hbits = high.reshape(nb, 8, 32).astype(np.int32) << np.arange(8)[None, :, None]
    out["hmask"] = hbits.sum(axis=1).astype(np.uint8)
    out["qs"] = pack_2bit(np.where(high, L - 4, L))
    return out


def dequant_q3_k(b):
    nb = len(b)
    q = unpack_2bit(b["qs"])
    hb = ((b["hmask"][:, None, :].astype(np.int32) >> np.arange(8)[None, :, None]) & 1).reshape(nb, 256)
    q = q - np.where(hb != 0, 0, 4)
    dl = (from_f16_bits(b["d"])[:, None] * (q3k_scales(b["scales"]) - 32).astype(F32)).astype(F32)
    return (np.repeat(dl, 16, axis=1) * q.astype(F32)).astype(F32).reshape(-1)


def quant_q2_k(x):
    nb = x.size // 256
    xs = x.reshape(nb, 16, 16)
    w = np.abs(xs)
    scale, mins, L = fit_affine(xs.reshape(-1, 16), w.reshape(-1, 16), 3, -0.5, 0.1, 15, mad=True)
    scale = scale.reshape(nb, 16)
    mins = mins.reshape(nb, 16)
    L = L.reshape(nb, 16, 16)
    top_s = np.maximum(scale.max(axis=1), F32(0)).astype(F32)
    top_m = np.maximum(mins.max(axis=1), F32(0)).astype(F32)
    inv_s = (F32(15) / safe(top_s)).astype(F32)
    inv_m = (F32(15) / safe(top_m)).astype(F32)
    ls = np.where((top_s > 0)[:, None], rint_magic(inv_s[:, None] * scale), 0)
    lm = np.where((top_m > 0)[:, None], rint_magic(inv_m[:, None] * mins), 0)
    out = np.zeros(nb, Q2_K)
    out["scales"] = ((ls & 255) | ((lm << 4) & 255)).astype(np.uint8)
    out["d"] = np.where(top_s > 0, f16_bits(top_s / F32(15)), f16_bits(F32(0)))
    out["dmin"] = np.where(top_m > 0, f16_bits(top_m / F32(15)), f16_bits(F32(0)))
    sc = out["scales"].astype(np.int32)
    dsub = (from_f16_bits(out["d"])[:, None] * (sc & 15).astype(F32)).astype(F32)
    msub = (from_f16_bits(out["dmin"])[:, None] * (sc >> 4).astype(F32)).astype(F32)
    v = ((xs + msub[:, :, None]).astype(F32) / safe(dsub)[:, :, None]).astype(F32)
    L = np.where((dsub != 0)[:, :, None], np.clip(rint_magic(v), 0, 3), L)
    out["qs"] = pack_2bit(L.reshape(nb, 256))
    return out


def dequant_q2_k(b):
    sc = b["scales"].astype(np.int32)
    dl = (from_f16_bits(b["d"])[:, None] * (sc & 15).astype(F32)).astype(F32)
    ml = (from_f16_bits(b["dmin"])[:, None] * (sc >> 4).astype(F32)).astype(F32)
    q = unpack_2bit(b["qs"]).astype(F32)
    return ((np.repeat(dl, 16, axis=1) * q).astype(F32) - np.repeat(ml, 16, axis=1)).astype(F32).reshape(-1)


# ---------------------------------------------------------------- plain types

def quant_f32(x):
    return x.astype("<f4")


def quant_f16(x):
    return f16_bits(x).astype("<u2")


def quant_bf16(x):
    return bf16_bits(x).astype("<u2")


TYPES = {
    # name: (block elements, block dtype, quantize, dequantize)
    "F32": (1, np.dtype("<f4"), quant_f32, lambda b: b.astype(F32)),
    "F16": (1, np.dtype("<u2"), quant_f16, from_f16_bits),
    "BF16": (1, np.dtype("<u2"), quant_bf16, from_bf16_bits),
    "Q8_0": (32, Q8_0, quant_q8_0, dequant_q8_0),
    "Q4_0": (32, Q4_0, quant_q4_0, dequant_q4_0),
    "Q4_K": (256, Q4_K, quant_q4_k, dequant_q4_k),
    "Q5_K": (256, Q5_K, quant_q5_k, dequant_q5_k),
    "Q6_K": (256, Q6_K, quant_q6_k, dequant_q6_k),
    "Q8_K": (256, Q8_K, quant_q8_k, dequant_q8_k),
    "Q5_0": (32, Q5_0, quant_q5_0, dequant_q5_0),
    "Q4_1": (32, Q4_1, quant_q4_1, dequant_q4_1),
    "IQ4_NL": (32, IQ4_NL, quant_iq4_nl, dequant_iq4_nl),
    "IQ4_XS": (256, IQ4_XS, quant_iq4_xs, dequant_iq4_xs),
    "Q3_K": (256, Q3_K, quant_q3_k, dequant_q3_k),
    "Q2_K": (256, Q2_K, quant_q2_k, dequant_q2_k),
}


def quantize(type_name, x):
    block, _, quant, _ = TYPES[type_name]
    x = np.ascontiguousarray(x, dtype=F32).reshape(-1)
    assert x.size % block == 0
    with np.errstate(all="ignore"):
        return quant(x)


def dequantize(type_name, data):
    _, dtype, _, dequant = TYPES[type_name]
    blocks = np.frombuffer(data, dtype=dtype)
    with np.errstate(all="ignore"):
        return np.asarray(dequant(blocks), dtype=F32).reshape(-1)


def run_batch(manifest):
    with open(manifest) as f:
        for line in f:
            parts = line.split()
            if not parts:
                continue
            type_name, n, src, dst, dst_deq = parts
            x = np.fromfile(src, dtype="<f4")
            assert x.size % int(n) == 0
            q = quantize(type_name, x).tobytes()
            with open(dst, "wb") as out:
                out.write(q)
            dequantize(type_name, q).astype("<f4").tofile(dst_deq)


def selftest():
    rng = np.random.default_rng(1)
    x = rng.standard_normal(4096).astype(F32)
    # Worst-case relative RMS error each format should stay under.
    limits = {"F32": 0.0, "F16": 1e-3, "BF16": 4e-3, "Q8_0": 0.01, "Q8_K": 0.01,
              "Q6_K": 0.03, "Q5_K": 0.06, "Q4_K": 0.12, "Q4_0": 0.15, "Q5_0": 0.06, "Q4_1": 0.1,
              "IQ4_NL": 0.1, "IQ4_XS": 0.1, "Q3_K": 0.2, "Q2_K": 0.35}
    ok = True
    for name, limit in limits.items():
        y = dequantize(name, quantize(name, x).tobytes())
        err = float(np.sqrt(np.mean((y - x) ** 2)))
        print(f"{name:6s} rms error {err:.5f} (limit {limit})")
        ok &= err <= limit
    return 0 if ok else 1


def main(argv):
    if len(argv) == 3 and argv[1] == "batch":
        run_batch(argv[2])
        return 0
    if len(argv) == 2 and argv[1] == "selftest":
        return selftest()
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
