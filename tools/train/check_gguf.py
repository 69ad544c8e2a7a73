#!/usr/bin/python3
"""Sanity-check an exported kvserve-tiny GGUF using only the file itself.

- reads it with tools/gguf.py and checks the metadata kvserve needs;
- rebuilds the tokenizer from tokenizer.ggml.tokens/merges and checks that
  digits are single tokens and special tokens are control tokens;
- runs an independent NumPy (float64) Llama forward that follows llama.cpp's
  conventions (GGUF dims ne[0]-first, interleaved "normal" RoPE, GQA head
  h -> kv head h // (n_head / n_head_kv)) and compares its logits with the
  PyTorch model loaded from the same tensors;
- greedy-decodes a short pass-key prompt with the NumPy forward.

    /usr/bin/python3 tools/train/check_gguf.py models/kvserve-tiny.gguf
"""

import os
import random
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

import gguf  # noqa: E402
import data as D  # noqa: E402
from model import Config, Llama  # noqa: E402
from tokenizer import Tokenizer, TOKEN_TYPE_CONTROL  # noqa: E402


def np_forward(r, ids):
    md, t = r.metadata, r.tensors
    n_layer = md["llama.block_count"]
    n_head = md["llama.attention.head_count"]
    n_kv = md["llama.attention.head_count_kv"]
    eps = md["llama.attention.layer_norm_rms_epsilon"]
    base = md["llama.rope.freq_base"]
    n_rot = md["llama.rope.dimension_count"]
    W = {k: v.astype(np.float64) for k, v in t.items()}
    x = W["token_embd.weight"][ids]  # [T, dim]
    T, dim = x.shape
    hd = dim // n_head
    pos = np.arange(T)[:, None]
    theta = pos * base ** (-np.arange(0, n_rot, 2) / n_rot)[None, :]  # [T, n_rot/2]
    cos, sin = np.cos(theta), np.sin(theta)

    def rms(v, w):
        return v / np.sqrt((v * v).mean(-1, keepdims=True) + eps) * w

    def rope(v):  # [T, H, hd], pairs (2i, 2i+1)
        out = v.copy()
        a, b = v[..., 0:n_rot:2], v[..., 1:n_rot:2]
        out[..., 0:n_rot:2] = a * cos[:, None, :] - b * sin[:, None, :]
        out[..., 1:n_rot:2] = a * sin[:, None, :] + b * cos[:, None, :]
        return out

    mask = np.triu(np.full((T, T), -np.inf), 1)
    for i in range(n_layer):
        p = f"blk.{i}."
        h = rms(x, W[p + "attn_norm.weight"])
        q = rope((h @ W[p + "attn_q.weight"].T).reshape(T, n_head, hd))
        k = rope((h @ W[p + "attn_k.weight"].T).reshape(T, n_kv, hd))
        v = (h @ W[p + "attn_v.weight"].T).reshape(T, n_kv, hd)
        o = np.zeros((T, n_head, hd))
        for hh in range(n_head):
            kv = hh // (n_head // n_kv)
            s = q[:, hh] @ k[:, kv].T / np.sqrt(hd) + mask
            s = np.exp(s - s.max(-1, keepdims=True))
            s /= s.sum(-1, keepdims=True)
            o[:, hh] = s @ v[:, kv]
        x = x + o.reshape(T, dim) @ W[p + "attn_output.weight"].T
        h = rms(x, W[p + "ffn_norm.weight"])
        g = h @ W[p + "ffn_gate.weight"].T
        x = x + ((g / (1 + np.exp(-g))) * (h @ W[p + "ffn_up.weight"].T)) @ W[p + "ffn_down.weight"].T
    x = rms(x, W["output_norm.weight"])
    out = W.get("output.weight", W["token_embd.weight"])
    return x @ out.T


def tokenizer_from_gguf(r):
    """The model's tokenizer rebuilt from tokenizer.ggml.tokens / merges."""
    md = r.metadata
    return Tokenizer(md["tokenizer.ggml.tokens"], [tuple(m.split(" ")) for m in md["tokenizer.ggml.merges"]])


def torch_from_gguf(r):
    md, t = r.metadata, r.tensors
    cfg = Config(vocab_size=md["llama.vocab_size"], dim=md["llama.embedding_length"],
                 n_layers=md["llama.block_count"], n_heads=md["llama.attention.head_count"],
                 n_kv_heads=md["llama.attention.head_count_kv"], ffn_dim=md["llama.feed_forward_length"],
                 max_seq_len=md["llama.context_length"], rope_base=md["llama.rope.freq_base"],
                 norm_eps=md["llama.attention.layer_norm_rms_epsilon"])
    m = Llama(cfg)
    sd = {"tok_emb.weight": t["token_embd.weight"], "norm.weight": t["output_norm.weight"],
          "output.weight": t["output.weight"]}
    names = dict(attn_norm="attn_norm", wq="attn_q", wk="attn_k", wv="attn_v", wo="attn_output",
                 ffn_norm="ffn_norm", w_gate="ffn_gate", w_up="ffn_up", w_down="ffn_down")
    for i in range(cfg.n_layers):
        for ours, theirs in names.items():
            sd[f"layers.{i}.{ours}.weight"] = t[f"blk.{i}.{theirs}.weight"]
    m.load_state_dict({k: torch.tensor(np.array(v, dtype=np.float32)) for k, v in sd.items()})
    m.eval()
    return m


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "..", "models", "kvserve-tiny.gguf")
    r = gguf.GGUFReader(path)
    md = r.metadata
    assert md["general.architecture"] == "llama"
    assert md["tokenizer.ggml.model"] == "gpt2" and md["tokenizer.ggml.pre"] == "gpt2"
    tokens = md["tokenizer.ggml.tokens"]
    assert len(tokens) == md["llama.vocab_size"] == r.tensors["token_embd.weight"].shape[0]
    merges = [tuple(m.split(" ")) for m in md["tokenizer.ggml.merges"]]
    tok = tokenizer_from_gguf(r)
    types = md["tokenizer.ggml.token_type"]
    for name in ("<|bos|>", "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|pad|>"):
        assert types[tok.token_to_id[name]] == TOKEN_TYPE_CONTROL, name
    assert md["tokenizer.ggml.bos_token_id"] == tok.bos_id
    assert md["tokenizer.ggml.eos_token_id"] == tok.eos_id
    for a, b in merges:
        assert not any(c.isdigit() for c in a + b)
    assert len(tok.encode(" 90210")) == 6
    print(f"metadata ok: vocab {len(tokens)}, {len(merges)} merges, "
          f"{sum(np.prod(v.shape) for v in r.tensors.values())} parameters, {os.path.getsize(path)} bytes")

    rng = random.Random(99)
    fc = D.FillerCache(tok)
    prompt, ans, info = D.eval_prompt(rng, tok, fc, 200, 0.5, chat=False)
    ids = np.array(prompt)
    ref = np_forward(r, ids)
    m = torch_from_gguf(r)
    with torch.no_grad():
        got = m(torch.tensor([prompt]))[0].double().numpy()
    err = np.abs(ref - got).max() / (np.abs(ref).max() + 1e-9)
    print(f"NumPy (llama.cpp conventions) vs PyTorch logits: max rel err {err:.2e}")
    assert err < 1e-4, err

    out = list(prompt)
    for _ in range(len(ans)):
        out.append(int(np_forward(r, np.array(out))[-1].argmax()))
    gen = tok.decode(out[len(prompt):])
    print(f"pass key {info['facts'][0]['value']}: NumPy greedy continuation {gen!r} "
          f"({'correct' if out[len(prompt):] == ans else 'WRONG'})")


if __name__ == "__main__":
    main()
