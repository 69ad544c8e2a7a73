#!/usr/bin/env python3
"""Independent NumPy reference of kvserve's forward pass (float64).

Reads a GGUF model with tools/gguf.py (F32/F16 tensors) and computes the
logits of every position of a token sequence with a plain dense causal
attention: no paging, no threading, no quantized activations. Tests compare
kvserve's logits against it. Architectures: llama, qwen2, qwen3, phi3 (fused
QKV and gate|up), gemma2 and gemma3 (embedding scale, GELU-tanh, post-norms,
soft-capping, sliding-window layers as a band mask), and mixture-of-experts
FFNs (llama with expert_count, qwen3moe, qwen2moe with its shared expert);
RoPE scaling: linear,
Llama 3 factors, YaRN and LongRoPE (--ctx: the served context that picks
LongRoPE's factors).

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
    def __init__(self, path, n_ctx=0):
        r = gguf.GGUFReader(path)
        md = r.metadata
        self.arch = md["general.architecture"]
        if self.arch not in ("llama", "qwen2", "qwen3", "phi3", "gemma2", "gemma3", "qwen3moe", "qwen2moe"):
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
        self.neox = self.arch != "llama"
        t = {k: np.asarray(v, dtype=np.float64) for k, v in r.tensors.items()}
        self.t = t
        self.emb = t["token_embd.weight"]  # [vocab, hidden]
        self.out = t.get("output.weight", self.emb)
        self.arch_params(md)
        self.rope_tables(md, n_ctx)
        self.n_expert = int(md.get(a + "expert_count", 0))
        self.n_expert_used = int(md.get(a + "expert_used_count", 0))
        self.expert_counts = np.zeros(max(self.n_expert, 1), dtype=np.int64)

    def moe_ffn(self, p, x):
        """Mixture of experts (Mixtral / Qwen-MoE): softmax over router logits,
        the expert_used_count most probable experts per token weighted by
        their probabilities (renormalised to sum 1 except for qwen2moe), each
        a SiLU-gated FFN; qwen2moe adds a shared expert times
        sigmoid(x . ffn_gate_inp_shexp)."""
        t = self.t
        logits = x @ t[p + "ffn_gate_inp.weight"].T  # [T, n_expert]
        probs = np.exp(logits - logits.max(axis=1, keepdims=True))
        probs /= probs.sum(axis=1, keepdims=True)
        gate, up, down = t[p + "ffn_gate_exps.weight"], t[p + "ffn_up_exps.weight"], t[p + "ffn_down_exps.weight"]
        out = np.zeros_like(x)
        for i in range(x.shape[0]):
            # Most probable first; equal probabilities: lower expert index first.
            top = sorted(range(self.n_expert), key=lambda e: (-probs[i, e], e))[:self.n_expert_used]
            w = probs[i, top]
            if self.arch != "qwen2moe":
                w = w / max(w.sum(), 6.103515625e-5)
            for e, we in zip(top, w):
                self.expert_counts[e] += 1
                g = gate[e] @ x[i]
                h = g / (1.0 + np.exp(-g)) * (up[e] @ x[i])
                out[i] += we * (down[e] @ h)
        if p + "ffn_gate_inp_shexp.weight" in t:
            g = x @ t[p + "ffn_gate_shexp.weight"].T
            h = g / (1.0 + np.exp(-g)) * (x @ t[p + "ffn_up_shexp.weight"].T)
            scale = 1.0 / (1.0 + np.exp(-(x @ t[p + "ffn_gate_inp_shexp.weight"].reshape(-1))))
            out += scale[:, None] * (h @ t[p + "ffn_down_shexp.weight"].T)
        return out

    def arch_params(self, md):
        """What Gemma 2/3 (and windows on Llama) add, with their published defaults."""
        a = self.arch + "."
        gemma = self.arch in ("gemma2", "gemma3")
        self.gemma = gemma
        self.window = int(md.get(a + "attention.sliding_window", 4096 if self.arch == "gemma2" else 0))
        if self.arch in ("qwen2", "qwen3", "phi3"):
            self.window = 0  # not applied for these architectures (as llama.cpp)
        pattern = md.get(a + "attention.sliding_window_pattern", {"gemma2": 2, "gemma3": 6}.get(self.arch, 0))
        if isinstance(pattern, list):  # one bool per layer
            self.sliding = [self.window > 0 and bool(x) for x in pattern]
        else:
            # Gemma: every pattern-th layer (the last of each period) is global.
            pattern = int(pattern)
            self.sliding = [self.window > 0 and (pattern == 0 or l % pattern < pattern - 1)
                            for l in range(self.n_layers)]
        self.attn_cap = float(md.get(a + "attn_logit_softcapping", 50.0)) if self.arch == "gemma2" else 0.0
        self.final_cap = float(md.get(a + "final_logit_softcapping", 30.0 if self.arch == "gemma2" else 0.0))
        self.qscale = 1.0 / np.sqrt(self.head_dim)
        if gemma and self.n_layers == (46 if self.arch == "gemma2" else 62):
            self.qscale = 1.0 / np.sqrt(self.hidden // self.n_heads)

    def rope_tables(self, md, n_ctx):
        """Angle per position of each rotated pair and the cos/sin multiplier,
        for global layers (self.inv_freq, self.mscale) and sliding ones
        (self.inv_freq_swa, self.mscale_swa)."""
        a = self.arch + "."
        glob = self.rope_table(md, n_ctx, self.base, None)
        base_swa = float(md.get(a + "rope.freq_base_swa", 10000.0 if self.arch == "gemma3" else self.base))
        # Sliding layers: Gemma 3's are unscaled; Gemma 2's and Llama's take the global factor.
        swa = self.rope_table(md, n_ctx, base_swa, 1.0 if self.arch == "gemma3" else None)
        self.inv_freq, self.mscale = glob
        self.inv_freq_swa, self.mscale_swa = swa

    def rope_table(self, md, n_ctx, base, layer_factor):
        """One layer kind's table: base, and its own factor (None: the file's).

        RoPE scaling as the YaRN paper (arXiv 2309.00071) and the LongRoPE
        paper (arXiv 2402.13753) define it, with GGUF's keys: rope.scaling.type
        (absent = linear), .factor, .original_context_length, .attn_factor.
        """
        a = self.arch + "."
        kind = md.get(a + "rope.scaling.type", "")
        factor = 1.0
        if kind in ("", "linear", "yarn"):
            factor = float(md.get(a + "rope.scaling.factor", md.get(a + "rope.scale_linear", 0.0))) or 1.0
        ctx = int(md.get(a + "context_length", 2048))
        orig = int(md.get(a + "rope.scaling.original_context_length", ctx))
        n_ctx = n_ctx or ctx
        d = self.rope_dim
        i = np.arange(d // 2, dtype=np.float64)
        inv = base ** (-2.0 * i / d)
        if "rope_freqs.weight" in self.t:  # Llama 3: per-pair wavelength divisors
            inv = inv / self.t["rope_freqs.weight"]
        if "rope_factors_long.weight" in self.t:  # LongRoPE: by serving context
            inv = inv / self.t["rope_factors_long.weight" if n_ctx > orig else "rope_factors_short.weight"]
        mscale = float(md.get(a + "rope.scaling.attn_factor", 1.0))
        global_factor = factor
        if layer_factor is not None:
            factor = layer_factor
        if kind == "yarn":
            # Pair i makes orig * inv[i] / (2 pi) turns over the original
            # context; pairs with more than beta_fast = 32 turns keep their
            # frequency, pairs with fewer than beta_slow = 1 are divided by the
            # factor, and a linear ramp (in pair index, between the rounded
            # bounds) mixes the two in between.
            def pair_with_turns(turns):
                return d * np.log(orig / (turns * 2 * np.pi)) / (2 * np.log(base))
            lo = max(0.0, np.floor(pair_with_turns(32.0)))
            hi = min(d - 1.0, np.ceil(pair_with_turns(1.0)))
            keep = 1.0 - np.clip((i - lo) / max(0.001, hi - lo), 0.0, 1.0)
            inv = inv * (keep + (1.0 - keep) / factor)
            # Attention temperature: sqrt(1/t) = 0.1 ln(s) + 1 (YaRN eq. 22),
            # over the same with mscale_all_dim when the file sets it.
            def m(s, mul):
                return 1.0 if s <= 1.0 else 0.1 * mul * np.log(s) + 1.0
            # The temperature is the global factor's; a layer with its own
            # factor swaps 0.1 ln(global) + 1 for 0.1 ln(own) + 1.
            log_mul = float(md.get(a + "rope.scaling.yarn_log_multiplier", 0.0))
            mscale *= m(global_factor, 1.0) / m(global_factor, log_mul) if log_mul else m(global_factor, 1.0)
            mscale *= (1.0 + 0.1 * np.log(factor)) / (1.0 + 0.1 * np.log(global_factor))
        elif kind != "none":
            inv = inv / factor
        return inv, mscale

    def rms(self, x, w):
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + self.eps) * w

    def rope(self, x, pos, sliding=False):
        # x: [T, heads, head_dim]; rotates the first rope_dim dims of each head.
        inv, ms = (self.inv_freq_swa, self.mscale_swa) if sliding else (self.inv_freq, self.mscale)
        th = pos[:, None] * inv[None, :]  # [T, rope_dim/2]
        c, s = ms * np.cos(th)[:, None, :], ms * np.sin(th)[:, None, :]
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
        if self.gemma:
            x = x * np.sqrt(self.hidden)
        hd, nh, nkv = self.head_dim, self.n_heads, self.n_kv
        mask = np.triu(np.full((T, T), -np.inf), 1)
        # Sliding layers: query i sees keys j with i - window < j <= i.
        swa_mask = mask + np.tril(np.full((T, T), -np.inf), -self.window) if self.window > 0 else mask
        for l in range(self.n_layers):
            p = f"blk.{l}."
            g = lambda n: self.t[p + n]  # noqa: E731
            xn = self.rms(x, g("attn_norm.weight"))
            if p + "attn_qkv.weight" in self.t:  # phi3: Q, K, V rows in one matrix
                qkv = xn @ g("attn_qkv.weight").T
                q, k, v = np.split(qkv, [nh * hd, (nh + nkv) * hd], axis=1)
            else:
                q = xn @ g("attn_q.weight").T
                k = xn @ g("attn_k.weight").T
                v = xn @ g("attn_v.weight").T
            if self.arch in ("qwen2", "qwen2moe"):
                q, k, v = q + g("attn_q.bias"), k + g("attn_k.bias"), v + g("attn_v.bias")
            q = q.reshape(T, nh, hd)
            k = k.reshape(T, nkv, hd)
            v = v.reshape(T, nkv, hd)
            if self.arch in ("qwen3", "qwen3moe", "gemma3"):
                q = self.rms(q, g("attn_q_norm.weight"))
                k = self.rms(k, g("attn_k_norm.weight"))
            sl = self.sliding[l]
            q, k = self.rope(q, pos, sl), self.rope(k, pos, sl)
            rep = nh // nkv
            k = np.repeat(k, rep, axis=1)
            v = np.repeat(v, rep, axis=1)
            # One head at a time, with BLAS products: a T x T score matrix per
            # head instead of all heads' at once (a 4K-token prompt's would
            # be 0.5 GB per layer, and einsum does not use BLAS).
            att = np.empty((T, nh, hd))
            for h in range(nh):
                s = (q[:, h, :] @ k[:, h, :].T) * self.qscale
                if self.attn_cap:
                    s = self.attn_cap * np.tanh(s / self.attn_cap)
                s += swa_mask if sl else mask
                s = np.exp(s - s.max(axis=-1, keepdims=True))
                s /= s.sum(axis=-1, keepdims=True)
                att[:, h, :] = s @ v[:, h, :]
            att = att.reshape(T, nh * hd)
            o = att @ g("attn_output.weight").T
            if self.gemma:
                o = self.rms(o, g("post_attention_norm.weight"))
            x = x + o
            xn = self.rms(x, g("ffn_norm.weight"))
            if self.n_expert > 0:
                x = x + self.moe_ffn(p, xn)
                continue
            if self.arch == "phi3":  # ffn_up holds gate rows then up rows
                gate, up = np.split(xn @ g("ffn_up.weight").T, 2, axis=1)
            else:
                gate = xn @ g("ffn_gate.weight").T
                up = xn @ g("ffn_up.weight").T
            if self.gemma:  # GELU, tanh form
                act = 0.5 * gate * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (gate + 0.044715 * gate ** 3)))
            else:
                act = gate / (1.0 + np.exp(-gate))
            o = (act * up) @ g("ffn_down.weight").T
            if self.gemma:
                o = self.rms(o, g("post_ffw_norm.weight"))
            x = x + o
        logits = self.rms(x, self.t["output_norm.weight"]) @ self.out.T
        if self.final_cap:
            logits = self.final_cap * np.tanh(logits / self.final_cap)
        return logits


def parse_tokens(arg):
    """Token ids from a --tokens argument: comma-separated, or @FILE with whitespace-separated ids."""
    if arg.startswith("@"):
        with open(arg[1:]) as f:
            return [int(x) for x in f.read().split()]
    return [int(x) for x in arg.split(",") if x]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--tokens", required=True, help="comma-separated ids, or @FILE with whitespace-separated ids")
    ap.add_argument("--out", help="write float32 logits [n_tokens, vocab] here")
    ap.add_argument("--ctx", type=int, default=0, help="serving context (LongRoPE factor choice); 0: trained")
    ap.add_argument("--generate", type=int, default=0, help="greedy-generate N tokens and print all ids")
    ap.add_argument("--expert-counts", help="MoE: write how many routings chose each expert (int64 [n_expert]) here")
    args = ap.parse_args()
    tokens = parse_tokens(args.tokens)
    m = Model(args.model, args.ctx)
    if args.out:
        m.logits(tokens).astype(np.float32).tofile(args.out)
    if args.expert_counts:
        m.expert_counts.tofile(args.expert_counts)
    if args.generate:
        toks = list(tokens)
        for _ in range(args.generate):
            toks.append(int(np.argmax(m.logits(toks)[-1])))
        print(" ".join(map(str, toks)))


if __name__ == "__main__":
    main()
