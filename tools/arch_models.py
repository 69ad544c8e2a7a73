#!/usr/bin/env python3
"""Small random models of each architecture kvserve runs, for the check
against llama.cpp (greedy tokens equal on a short prompt).

The tensors come from a seeded NumPy generator, so the same model can be
written by two writers:

  write --writer kvserve   tools/gguf.py (the project's writer; model_test)
  write --writer gguf-py   llama.cpp's gguf-py (--gguf-py DIR), what llama.cpp
                           itself would read from a converter

Both carry stories260K's vocabulary (llama.cpp wants one to load), F32
weights, 2 layers, and what makes each architecture differ: phi3's fused
tensors and LongRoPE factors (original context 16: the served context is
past it), Gemma's post-norms, soft-capping (gemma2), Q/K norms (gemma3) and
sliding window of 8 on alternate layers, shorter than the prompt. (No
window on llama: llama.cpp ignores llama.attention.sliding_window.) The
mixture-of-experts models have 4 experts, 2 used per token: qwen3moe (Q/K
norms, expert_feed_forward_length 32), mixtral (`llama` with experts of
the FFN width) and qwen2moe (QKV biases, default expert width FFN / 2,
shared expert of 48).

  greedy --llama-server BIN --gguf-py DIR --vocab stories260K.gguf --out F
      writes each architecture with gguf-py, serves it with llama-server
      (-c 256, F32 KV cache, 1 thread), asks POST /completion for N greedy
      tokens after PROMPT (token ids), ids below BANNED_BELOW excluded, and writes F in the format of
      src/model/testdata/stories260k_greedy_llamacpp.txt. --archs picks
      some architectures; --append adds their lines to F instead.

/usr/bin/python3 tools/arch_models.py write --arch gemma3 --vocab V --out m.gguf
"""
import argparse
import importlib.util
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ARCHS = ("llama", "phi3", "gemma2", "gemma3", "qwen3moe", "mixtral", "qwen2moe")
GGUF_ARCH = {"mixtral": "llama"}  # Mixtral is a `llama` file with experts
N_EXPERT, N_EXPERT_USED = 4, 2
PROMPT = [1, 403, 407, 261, 378, 365, 271, 260, 425, 268, 285, 334, 266, 259, 292, 305, 350, 426, 267, 301]
N_PREDICT = 16
BANNED_BELOW = 259  # ids [0, 259) never generated: <unk> <s> </s> and <0x00>..<0xFF>
HIDDEN, HEADS, KV_HEADS, HEAD_DIM, FFN, LAYERS = 64, 4, 2, 16, 128, 2


def load_module(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def spec_of(arch, vocab):
    """(metadata [(key, kind, value)], tensors [(name, f32 array)])."""
    rng = np.random.default_rng({"llama": 11, "phi3": 12, "gemma2": 13, "gemma3": 14, "qwen3moe": 15, "mixtral": 16,
                                 "qwen2moe": 17}[arch])
    moe = arch in ("qwen3moe", "mixtral", "qwen2moe")
    gguf_arch = GGUF_ARCH.get(arch, arch)
    a = gguf_arch + "."
    md = [
        ("general.architecture", "str", gguf_arch),
        ("general.name", "str", "random model"),  # not "phi3": llama.cpp then wants Phi-3 special tokens
        (a + "block_count", "u32", LAYERS),
        (a + "embedding_length", "u32", HIDDEN),
        (a + "feed_forward_length", "u32", FFN),
        (a + "attention.head_count", "u32", HEADS),
        (a + "attention.head_count_kv", "u32", KV_HEADS),
        (a + "attention.key_length", "u32", HEAD_DIM),
        (a + "attention.value_length", "u32", HEAD_DIM),
        (a + "context_length", "u32", 4096),
        (a + "attention.layer_norm_rms_epsilon", "f32", 1e-6),
        (a + "rope.freq_base", "f32", 10000.0),
        (a + "rope.dimension_count", "u32", HEAD_DIM),
    ]
    if arch == "phi3":
        md += [(a + "rope.scaling.original_context_length", "u32", 16), (a + "rope.scaling.attn_factor", "f32", 1.19)]
    if arch in ("gemma2", "gemma3"):
        md += [(a + "attention.sliding_window", "u32", 8), (a + "attention.sliding_window_pattern", "u32", 2)]
    if arch == "gemma2":
        md += [(a + "attn_logit_softcapping", "f32", 5.0), (a + "final_logit_softcapping", "f32", 10.0)]
    expert_ffn = {"qwen3moe": 32, "mixtral": FFN, "qwen2moe": FFN // N_EXPERT_USED}.get(arch, 0)
    if moe:
        md += [(a + "expert_count", "u32", N_EXPERT), (a + "expert_used_count", "u32", N_EXPERT_USED)]
    if arch == "qwen3moe":
        md += [(a + "expert_feed_forward_length", "u32", expert_ffn)]
    if arch == "qwen2moe":
        md += [(a + "expert_shared_feed_forward_length", "u32", 48)]

    ws = 1.0 / np.sqrt(HIDDEN)
    t = []

    def add(name, shape, std, mean=0.0):
        t.append((name, (mean + std * rng.standard_normal(shape)).astype(np.float32)))

    # A tied random Gemma whose embeddings (x 8 in the residual) outweigh
    # the layers mostly repeats its last input token, a weak check: gemma2
    # (always tied in llama.cpp) gets small embeddings, the others an output.
    add("token_embd.weight", (vocab, HIDDEN), {"gemma2": 0.02, "gemma3": 0.2}.get(arch, 1.0))
    add("output_norm.weight", (HIDDEN,), 0.1, 1.0)
    if arch != "gemma2":
        add("output.weight", (vocab, HIDDEN), ws)
    if arch == "phi3":
        half = HEAD_DIM // 2
        t.append(("rope_factors_short.weight", (1.0 + 0.5 * np.arange(half) / half).astype(np.float32)))
        t.append(("rope_factors_long.weight", (1.0 + 8.0 * (np.arange(half) / half) ** 2).astype(np.float32)))
    q, kv = HEADS * HEAD_DIM, KV_HEADS * HEAD_DIM
    for l in range(LAYERS):
        p = f"blk.{l}."
        add(p + "attn_norm.weight", (HIDDEN,), 0.1, 1.0)
        if arch == "phi3":
            add(p + "attn_qkv.weight", (q + 2 * kv, HIDDEN), ws)
        else:
            add(p + "attn_q.weight", (q, HIDDEN), ws)
            add(p + "attn_k.weight", (kv, HIDDEN), ws)
            add(p + "attn_v.weight", (kv, HIDDEN), ws)
        add(p + "attn_output.weight", (HIDDEN, q), 1.0 / np.sqrt(q))
        if arch == "qwen2moe":
            add(p + "attn_q.bias", (q,), 0.1)
            add(p + "attn_k.bias", (kv,), 0.1)
            add(p + "attn_v.bias", (kv,), 0.1)
        if arch in ("gemma3", "qwen3moe"):
            add(p + "attn_q_norm.weight", (HEAD_DIM,), 0.1, 1.0)
            add(p + "attn_k_norm.weight", (HEAD_DIM,), 0.1, 1.0)
        if arch in ("gemma2", "gemma3"):
            add(p + "post_attention_norm.weight", (HIDDEN,), 0.1, 1.0)
            add(p + "post_ffw_norm.weight", (HIDDEN,), 0.1, 1.0)
        add(p + "ffn_norm.weight", (HIDDEN,), 0.1, 1.0)
        if moe:
            # Expert tensors [experts, rows, cols]; a router 4x the usual
            # scale, so that routing is decisive rather than near ties.
            add(p + "ffn_gate_inp.weight", (N_EXPERT, HIDDEN), 4 * ws)
            add(p + "ffn_gate_exps.weight", (N_EXPERT, expert_ffn, HIDDEN), ws)
            add(p + "ffn_up_exps.weight", (N_EXPERT, expert_ffn, HIDDEN), ws)
            add(p + "ffn_down_exps.weight", (N_EXPERT, HIDDEN, expert_ffn), 1.0 / np.sqrt(expert_ffn))
            if arch == "qwen2moe":
                add(p + "ffn_gate_inp_shexp.weight", (HIDDEN,), ws)
                add(p + "ffn_gate_shexp.weight", (48, HIDDEN), ws)
                add(p + "ffn_up_shexp.weight", (48, HIDDEN), ws)
                add(p + "ffn_down_shexp.weight", (HIDDEN, 48), 1.0 / np.sqrt(48))
            continue
        if arch == "phi3":
            add(p + "ffn_up.weight", (2 * FFN, HIDDEN), ws)  # gate rows, then up rows
        else:
            add(p + "ffn_gate.weight", (FFN, HIDDEN), ws)
            add(p + "ffn_up.weight", (FFN, HIDDEN), ws)
        add(p + "ffn_down.weight", (HIDDEN, FFN), 1.0 / np.sqrt(FFN))
    return md, t


def vocab_of(path):
    ours = load_module("kvs_gguf", os.path.join(HERE, "gguf.py"))
    md = ours.GGUFReader(path).metadata
    return md["tokenizer.ggml.tokens"], md["tokenizer.ggml.scores"], md["tokenizer.ggml.token_type"]


def write_kvserve(arch, vocab_path, out):
    ours = load_module("kvs_gguf", os.path.join(HERE, "gguf.py"))
    tokens, scores, types = vocab_of(vocab_path)
    md, tensors = spec_of(arch, len(tokens))
    w = ours.GGUFWriter()
    for k, kind, v in md:
        {"str": w.add_string, "u32": w.add_uint32, "f32": w.add_float32}[kind](k, v)
    w.add_string("tokenizer.ggml.model", "llama")
    w.add_array("tokenizer.ggml.tokens", tokens, ours.GGUFType.STRING)
    w.add_array("tokenizer.ggml.scores", scores, ours.GGUFType.FLOAT32)
    w.add_array("tokenizer.ggml.token_type", types, ours.GGUFType.INT32)
    w.add_uint32("tokenizer.ggml.bos_token_id", 1)
    w.add_uint32("tokenizer.ggml.eos_token_id", 2)
    for name, arr in tensors:
        w.add_tensor(name, arr)
    w.write(out)


def write_gguf_py(arch, vocab_path, out, gguf_py):
    sys.path.insert(0, gguf_py)
    import gguf as g  # llama.cpp's gguf-py

    tokens, scores, types = vocab_of(vocab_path)
    md, tensors = spec_of(arch, len(tokens))
    w = g.GGUFWriter(out, GGUF_ARCH.get(arch, arch))
    for k, kind, v in md:
        if k == "general.architecture":
            continue  # the writer adds it
        {"str": w.add_string, "u32": w.add_uint32, "f32": w.add_float32}[kind](k, v)
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    for name, arr in tensors:
        w.add_tensor(name, arr)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def llama_server_greedy(server, model, n):
    port = free_port()
    proc = subprocess.Popen([server, "-m", model, "-c", "256", "-t", "1", "-ctk", "f32", "-ctv", "f32",
                             "--port", str(port), "--host", "127.0.0.1"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        url = f"http://127.0.0.1:{port}"
        for _ in range(300):
            try:
                with urllib.request.urlopen(url + "/health", timeout=1) as r:
                    if r.status == 200:
                        break
            except Exception:
                time.sleep(0.1)
        # Banned: unk/bos/eos and the byte tokens (a random model strings
        # bytes into invalid UTF-8, which the server refuses to return).
        body = json.dumps({"prompt": PROMPT, "n_predict": n, "temperature": 0, "return_tokens": True,
                           "cache_prompt": False, "logit_bias": [[i, False] for i in range(BANNED_BELOW)]}).encode()
        req = urllib.request.Request(url + "/completion", body, {"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=60) as r:
            return json.loads(r.read())["tokens"]
    finally:
        proc.terminate()
        proc.wait()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("write")
    w.add_argument("--arch", choices=ARCHS, required=True)
    w.add_argument("--vocab", required=True, help="a GGUF whose tokenizer is copied (stories260K.gguf)")
    w.add_argument("--out", required=True)
    w.add_argument("--writer", choices=("kvserve", "gguf-py"), default="kvserve")
    w.add_argument("--gguf-py", default=os.path.expanduser("~/kvserve-ref/llama.cpp/gguf-py"))
    gr = sub.add_parser("greedy")
    gr.add_argument("--llama-server", default=os.path.expanduser("~/kvserve-ref/llama.cpp/build/bin/llama-server"))
    gr.add_argument("--gguf-py", default=os.path.expanduser("~/kvserve-ref/llama.cpp/gguf-py"))
    gr.add_argument("--vocab", required=True)
    gr.add_argument("--dir", required=True, help="where the gguf-py models go")
    gr.add_argument("--out", required=True)
    gr.add_argument("--archs", default=",".join(ARCHS), help="comma-separated subset of " + ", ".join(ARCHS))
    gr.add_argument("--append", action="store_true", help="append the lines to --out (keeping its header)")
    args = ap.parse_args()
    if args.cmd == "write":
        if args.writer == "kvserve":
            write_kvserve(args.arch, args.vocab, args.out)
        else:
            write_gguf_py(args.arch, args.vocab, args.out, args.gguf_py)
        return
    lines = []
    for arch in args.archs.split(","):
        if arch not in ARCHS:
            raise SystemExit(f"unknown architecture {arch}")
        path = os.path.join(args.dir, arch + ".gguf")
        write_gguf_py(arch, args.vocab, path, args.gguf_py)
        toks = llama_server_greedy(args.llama_server, path, N_PREDICT)
        lines.append(f"{arch} {' '.join(map(str, PROMPT))} | {' '.join(map(str, toks))}")
        print(lines[-1], flush=True)
    if args.append:
        with open(args.out, "a") as f:
            f.write("\n".join(lines) + "\n")
        return
    with open(args.out, "w") as f:
        f.write("# Greedy tokens of llama.cpp (~/kvserve-ref build of commit 3f545be) on tools/arch_models.py's "
                "random models, written with its gguf-py:\n")
        f.write("# /usr/bin/python3 tools/arch_models.py greedy --vocab ../shared/models/stories260K.gguf ...\n")
        f.write("# llama-server -c 256 -t 1 -ctk f32 -ctv f32, POST /completion temperature 0, n_predict "
                f"{N_PREDICT}, ids below {BANNED_BELOW} banned (logit_bias). One line per architecture: "
                "arch, prompt ids | generated ids.\n")
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
