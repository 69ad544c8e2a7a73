#!/usr/bin/env python3
"""Independent NumPy reference of kvserve's forward pass (float64).

Reads a GGUF model with tools/gguf.py (F32/F16 tensors) and computes the
logits of every position of a token sequence with a plain dense causal
attention: no paging, no threading, no quantized activations. Tests compare
kvserve's logits against it.

  /usr/bin/python3 tools/reference.py --model M.gguf --tokens 1,2,3 --out logits.f32
  /usr/bin/python3 tools/reference.py --model M.gguf --tokens 1,2,3 --generate 20

--out writes float32 [n_tokens, vocab] row-major; --generate prints greedy ids.
"""
import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gguf  # noqa: E402


class Model:
    def __init__(self, path):
        r = gguf.GGUFReader(path)
        md = r.metadata
        self.arch = md["general.architecture"]
        if self.arch not in ("llama", "qwen2", "qwen3"):
            raise SystemExit(f"unsupported architecture {self.arch}")
        a = self.arch + "."
        self.n_layers = int(md[a + "block_count"])
        self.hidden = int(md[a + "embedding_length"])
        self.n_heads = int(md[a + "attention.head_count"])
        self.n_kv = int(md.get(a + "attention.head_count_kv", self.n_heads))
        self.head_dim = int(md.get(a + "attention.key_length", self.hidden // self.n_heads))
        self.eps = float(md.get(a + "attention.layer_norm_rms_epsilon", 1e-5))
        self.base = float(md.get(a + "rope.freq_base", 10000.0))
        self.rope_dim = int(md.get(a + "rope.dimension_count", self.head_dim))
        scale = 1.0
        if md.get(a + "rope.scaling.type", "none") == "linear":
            scale = float(md.get(a + "rope.scaling.factor", 1.0))
        self.neox = self.arch != "llama"
        t = {k: np.asarray(v, dtype=np.float64) for k, v in r.tensors.items()}
        self.t = t
        self.emb = t["token_embd.weight"]  # [vocab, hidden]
        self.out = t.get("output.weight", self.emb)
        i = np.arange(self.rope_dim // 2, dtype=np.float64)
        inv = self.base ** (-2.0 * i / self.rope_dim)
        if "rope_freqs.weight" in t:
            inv = inv / t["rope_freqs.weight"]
        self.inv_freq = inv / scale

    def rms(self, x, w):
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + self.eps) * w

    def rope(self, x, pos):
        # x: [T, heads, head_dim]; rotates the first rope_dim dims of each head.
        th = pos[:, None] * self.inv_freq[None, :]  # [T, rope_dim/2]
        c, s = np.cos(th)[:, None, :], np.sin(th)[:, None, :]
        x = x.copy()
        half = self.rope_dim // 2
        if self.neox:
            x0, x1 = x[..., :half].copy(), x[..., half:self.rope_dim].copy()
            x[..., :half] = x0 * c - x1 * s
            x[..., half:self.rope_dim] = x0 * s + x1 * c
        else:
            x0, x1 = x[..., 0:self.rope_dim:2].copy(), x[..., 1:self.rope_dim:2].copy()
            x[..., 0:self.rope_dim:2] = x0 * c - x1 * s
            x[..., 1:self.rope_dim:2] = x0 * s + x1 * c
        return x

    def logits(self, tokens):
        T = len(tokens)
        pos = np.arange(T, dtype=np.float64)
        x = self.emb[np.asarray(tokens)]
        hd, nh, nkv = self.head_dim, self.n_heads, self.n_kv
        mask = np.triu(np.full((T, T), -np.inf), 1)
        for l in range(self.n_layers):
            p = f"blk.{l}."
            g = lambda n: self.t[p + n]  # noqa: E731
            xn = self.rms(x, g("attn_norm.weight"))
            q = xn @ g("attn_q.weight").T
            k = xn @ g("attn_k.weight").T
            v = xn @ g("attn_v.weight").T
            if self.arch == "qwen2":
                q, k, v = q + g("attn_q.bias"), k + g("attn_k.bias"), v + g("attn_v.bias")
            q = q.reshape(T, nh, hd)
            k = k.reshape(T, nkv, hd)
            v = v.reshape(T, nkv, hd)
            if self.arch == "qwen3":
                q = self.rms(q, g("attn_q_norm.weight"))
                k = self.rms(k, g("attn_k_norm.weight"))
            q, k = self.rope(q, pos), self.rope(k, pos)
            rep = nh // nkv
            k = np.repeat(k, rep, axis=1)
            v = np.repeat(v, rep, axis=1)
            s = np.einsum("thd,shd->hts", q, k) / np.sqrt(hd) + mask[None]
            s = np.exp(s - s.max(axis=-1, keepdims=True))
            s /= s.sum(axis=-1, keepdims=True)
            att = np.einsum("hts,shd->thd", s, v).reshape(T, nh * hd)
            x = x + att @ g("attn_output.weight").T
            xn = self.rms(x, g("ffn_norm.weight"))
            gate = xn @ g("ffn_gate.weight").T
            up = xn @ g("ffn_up.weight").T
            x = x + (gate / (1.0 + np.exp(-gate)) * up) @ g("ffn_down.weight").T
        return self.rms(x, self.t["output_norm.weight"]) @ self.out.T


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--tokens", required=True, help="comma-separated ids, or @FILE with whitespace-separated ids")
    ap.add_argument("--out", help="write float32 logits [n_tokens, vocab] here")
    ap.add_argument("--generate", type=int, default=0, help="greedy-generate N tokens and print all ids")
    args = ap.parse_args()
    if args.tokens.startswith("@"):
        with open(args.tokens[1:]) as f:
            tokens = [int(x) for x in f.read().split()]
    else:
        tokens = [int(x) for x in args.tokens.split(",") if x]
    m = Model(args.model)
    if args.out:
        m.logits(tokens).astype(np.float32).tofile(args.out)
    if args.generate:
        toks = list(tokens)
        for _ in range(args.generate):
            toks.append(int(np.argmax(m.logits(toks)[-1])))
        print(" ".join(map(str, toks)))


if __name__ == "__main__":
    main()
