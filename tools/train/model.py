"""Tiny Llama-architecture model (RMSNorm, interleaved RoPE, GQA, SwiGLU) in PyTorch.

RoPE is the interleaved ("normal", GPT-J-like) form on pairs (x[2i], x[2i+1])
with theta_i = base^(-2i/head_dim), which is what llama.cpp's "llama"
architecture computes, so the weights export to GGUF without any row
permutation. Query head h uses KV head h // (n_head / n_head_kv).
"""

import math
from dataclasses import dataclass, asdict

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass
class Config:
    vocab_size: int = 2048
    dim: int = 128
    n_layers: int = 2
    n_heads: int = 4
    n_kv_heads: int = 2
    ffn_dim: int = 384
    max_seq_len: int = 4096
    rope_base: float = 10000.0
    norm_eps: float = 1e-5

    @property
    def head_dim(self):
        return self.dim // self.n_heads

    def to_dict(self):
        return asdict(self)


class RMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rope_tables(head_dim, positions, base):
    """cos/sin of shape [T, head_dim/2] for integer positions [T] (or [B, T] -> [B, T, head_dim/2])."""
    inv = base ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
    ang = positions.to(torch.float64)[..., None] * inv
    return torch.cos(ang).float(), torch.sin(ang).float()


def apply_rope(x, cos, sin):
    """x: [B, H, T, hd]; rotate interleaved pairs (x[2i], x[2i+1])."""
    x0 = x[..., 0::2]
    x1 = x[..., 1::2]
    r0 = x0 * cos - x1 * sin
    r1 = x0 * sin + x1 * cos
    return torch.stack((r0, r1), dim=-1).flatten(-2)


ATTN_CHUNK = 512
_mask_cache = {}


def _causal_mask(qs, qe, kn):
    """Additive mask [qe-qs, kn] for queries at positions qs..qe-1 over keys 0..kn-1."""
    key = (qs, qe, kn)
    m = _mask_cache.get(key)
    if m is None:
        if len(_mask_cache) > 256:
            _mask_cache.clear()
        qpos = torch.arange(qs, qe)[:, None]
        kpos = torch.arange(kn)[None, :]
        m = torch.zeros(qe - qs, kn).masked_fill(kpos > qpos, float("-inf"))
        _mask_cache[key] = m
    return m


class Block(nn.Module):
    def __init__(self, c: Config):
        super().__init__()
        self.c = c
        hd = c.head_dim
        self.attn_norm = RMSNorm(c.dim, c.norm_eps)
        self.wq = nn.Linear(c.dim, c.n_heads * hd, bias=False)
        self.wk = nn.Linear(c.dim, c.n_kv_heads * hd, bias=False)
        self.wv = nn.Linear(c.dim, c.n_kv_heads * hd, bias=False)
        self.wo = nn.Linear(c.n_heads * hd, c.dim, bias=False)
        self.ffn_norm = RMSNorm(c.dim, c.norm_eps)
        self.w_gate = nn.Linear(c.dim, c.ffn_dim, bias=False)
        self.w_up = nn.Linear(c.dim, c.ffn_dim, bias=False)
        self.w_down = nn.Linear(c.ffn_dim, c.dim, bias=False)

    def forward(self, x, cos, sin, q_start=0, key_bias=None):
        """x: [B, T, dim]. Only positions >= q_start produce outputs (queries);
        keys/values use all T positions. Returns [B, T - q_start, dim].
        key_bias: optional [B, T] added to every query's score of each key;
        log(m) on a key weighs it as m copies of itself (training only)."""
        c = self.c
        B, T, _ = x.shape
        hd = c.head_dim
        h = self.attn_norm(x)
        hq = h[:, q_start:]
        Tq = T - q_start
        q = self.wq(hq).view(B, Tq, c.n_heads, hd).transpose(1, 2)
        k = self.wk(h).view(B, T, c.n_kv_heads, hd).transpose(1, 2)
        v = self.wv(h).view(B, T, c.n_kv_heads, hd).transpose(1, 2)
        q = apply_rope(q, cos[..., q_start:, :], sin[..., q_start:, :])
        k = apply_rope(k, cos, sin)
        g = c.n_heads // c.n_kv_heads
        q = q.reshape(B, c.n_kv_heads, g, Tq, hd) * (1.0 / math.sqrt(hd))
        k = k.unsqueeze(2)  # [B, n_kv, 1, T, hd]
        v = v.unsqueeze(2)
        # Causal attention in query chunks: chunk [s, e) only sees keys [0, e), so the
        # upper triangle is never computed and peak memory stays bounded.
        outs = []
        for s in range(0, Tq, ATTN_CHUNK):
            e = min(Tq, s + ATTN_CHUNK)
            ke = q_start + e  # keys visible to the last query of the chunk
            sc = torch.matmul(q[:, :, :, s:e], k[:, :, :, :ke].transpose(-1, -2))
            sc = sc + _causal_mask(q_start + s, q_start + e, ke)
            if key_bias is not None:
                sc = sc + key_bias[:, None, None, None, :ke]
            outs.append(torch.matmul(torch.softmax(sc, dim=-1), v[:, :, :, :ke]))
        o = outs[0] if len(outs) == 1 else torch.cat(outs, dim=3)  # [B, n_kv, g, Tq, hd]
        o = o.reshape(B, c.n_heads, Tq, hd).transpose(1, 2).reshape(B, Tq, c.n_heads * hd)
        x = x[:, q_start:] + self.wo(o)
        h = self.ffn_norm(x)
        x = x + self.w_down(F.silu(self.w_gate(h)) * self.w_up(h))
        return x


class Llama(nn.Module):
    def __init__(self, c: Config):
        super().__init__()
        self.c = c
        self.tok_emb = nn.Embedding(c.vocab_size, c.dim)
        self.layers = nn.ModuleList(Block(c) for _ in range(c.n_layers))
        self.norm = RMSNorm(c.dim, c.norm_eps)
        self.output = nn.Linear(c.dim, c.vocab_size, bias=False)
        self.apply(self._init)
        for l in self.layers:  # scaled residual projections
            nn.init.normal_(l.wo.weight, std=0.02 / math.sqrt(2 * c.n_layers))
            nn.init.normal_(l.w_down.weight, std=0.02 / math.sqrt(2 * c.n_layers))

    @staticmethod
    def _init(m):
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, std=0.02)

    def forward(self, ids, last_n=None, positions=None, key_bias=None):
        """ids: [B, T]. Returns logits for the last `last_n` positions (all if None):
        [B, last_n, vocab]. The last layer only computes queries for those positions,
        which is exact for them and saves most of its attention cost.
        positions: optional [B, T] increasing position ids (default 0..T-1); training
        uses gaps in them to show long distances in short sequences.
        key_bias: optional [B, T] per-key score bias (see Block.forward); training
        weighs filler keys as several copies to show a long context's crowd of keys."""
        B, T = ids.shape
        if positions is None:
            cos, sin = rope_tables(self.c.head_dim, torch.arange(T), self.c.rope_base)
        else:
            cos, sin = rope_tables(self.c.head_dim, positions, self.c.rope_base)
            cos, sin = cos[:, None], sin[:, None]  # [B, 1, T, hd/2]: broadcast over heads
        x = self.tok_emb(ids)
        q_start = 0 if last_n is None else T - last_n
        for i, l in enumerate(self.layers):
            last = i == len(self.layers) - 1
            x = l(x, cos, sin, q_start if last else 0, key_bias)
        if len(self.layers) == 0:
            x = x[:, q_start:]
        return self.output(self.norm(x))

    def n_params(self):
        return sum(p.numel() for p in self.parameters())
