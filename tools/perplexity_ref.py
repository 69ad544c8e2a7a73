#!/usr/bin/env python3
"""Independent NumPy reference of `kvserve perplexity` (llama-perplexity's method).

Takes the token ids of a whole text (as `kvserve tokenize --add-special` gives
them), cuts them into non-overlapping windows of --ctx tokens, writes BOS over
each window's first token when the GGUF's vocabulary adds one, computes every
position's logits with tools/reference.py (float64, dense attention) and
scores the tokens after position ctx/2. Prints one JSON line:
{"ppl": ..., "ppl_err": ..., "count": ..., "chunks": ...}.

  /usr/bin/python3 tools/perplexity_ref.py --model M.gguf --tokens @ids.txt --ctx 64 --chunks 3
"""
import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gguf  # noqa: E402
import reference  # noqa: E402


def bos_to_write(md):
    """BOS id when the vocabulary adds one (llama.cpp's default: SentencePiece vocabularies do), else None."""
    add = md.get("tokenizer.ggml.add_bos_token", md.get("tokenizer.ggml.model") == "llama")
    bos = md.get("tokenizer.ggml.bos_token_id")
    return int(bos) if add and bos is not None else None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--tokens", required=True, help="@FILE with whitespace-separated ids, or comma-separated ids")
    ap.add_argument("--ctx", type=int, required=True)
    ap.add_argument("--chunks", type=int, default=-1)
    args = ap.parse_args()
    tokens = reference.parse_tokens(args.tokens)
    n_ctx = args.ctx
    if len(tokens) < 2 * n_ctx:
        raise SystemExit(f"{len(tokens)} tokens; need at least {2 * n_ctx}")
    bos = bos_to_write(gguf.GGUFReader(args.model).metadata)
    m = reference.Model(args.model)
    n_chunks = len(tokens) // n_ctx
    if args.chunks > 0:
        n_chunks = min(n_chunks, args.chunks)
    first = n_ctx // 2
    nlls = []
    for c in range(n_chunks):
        window = list(tokens[c * n_ctx:(c + 1) * n_ctx])
        if bos is not None:
            window[0] = bos
        logits = m.logits(window)  # [n_ctx, vocab], float64
        for i in range(first, n_ctx - 1):
            row = logits[i]
            top = row.max()
            log_z = top + np.log(np.exp(row - top).sum())
            nlls.append(log_z - row[window[i + 1]])
    nll = np.asarray(nlls)
    ppl = float(np.exp(nll.mean()))
    err = float(np.sqrt(nll.var() / (len(nll) - 1)) * ppl)
    print(json.dumps({"ppl": ppl, "ppl_err": err, "count": len(nll), "chunks": n_chunks}))


if __name__ == "__main__":
    main()
