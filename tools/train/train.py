#!/usr/bin/python3
"""Train kvserve's bundled tiny Llama model on CPU and export it to GGUF.

One command, fixed seeds:
    nice -n 19 /usr/bin/python3 tools/train/train.py --out models/kvserve-tiny.gguf

Checkpoints go to tools/train/out/ckpt.pt (every --ckpt-every steps); any
checkpoint can be exported and evaluated with
    /usr/bin/python3 tools/train/train.py --export-only --out models/kvserve-tiny.gguf
and training resumes from it with --resume.
"""

import argparse
import json
import math
import os
import random
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))  # tools/ for gguf.py

import data as D  # noqa: E402
from model import Config, Llama  # noqa: E402
from tokenizer import Tokenizer, verify_split  # noqa: E402
import gguf  # noqa: E402

CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


def log(*a):
    print(time.strftime("%H:%M:%S"), *a, flush=True)


# ----------------------------------------------------------------------------
# Tokenizer


def tokenizer_corpus(seed, n=6000):
    rng = random.Random(seed)
    texts = []
    for _ in range(n):
        texts.append(D.language_text(rng))
    for _ in range(n // 4):
        used = set()
        facts = [D.make_fact(rng, k, used, rng.randint(3, 7)) for k in D.FACT_KINDS]
        parts = [rng.choice(D.FILLER) for _ in range(4)]
        for f in facts:
            parts += [f["fact"], f["question"], f"{f['prefix']} {f['value']}."]
        texts.append(" ".join(parts))
        texts.append(D.render_chat([("user", " ".join(parts[:3]) + "\n" + facts[0]["question"]),
                                    ("assistant", f"{facts[0]['prefix']} {facts[0]['value']}.")]))
    for name in D.NAMES:
        texts.append(f"{name} and {name}.")
    for city in D.CITIES:
        texts.append(f"The code for {city} is 1.")
    return texts


def build_tokenizer(seed, vocab_size):
    texts = tokenizer_corpus(seed)
    plain = [t for tx in texts for t in tx.replace("<|im_start|>", "\n").replace("<|im_end|>", "\n").split("\n\n")]
    n = verify_split(plain[:3000])
    log(f"GPT-2 split verified against ASCII regex on {n} texts")
    # Special tokens are not part of BPE training.
    clean = [t.replace("<|im_start|>", "").replace("<|im_end|>", "") for t in texts]
    tok = Tokenizer.train(clean, vocab_size, log=log)
    for a, b in tok.merges:
        assert not any(ch.isdigit() for ch in a + b), (a, b)
    assert tok.encode(" 48213") == tok.encode(" ") + [tok.token_to_id[d] for d in "48213"]
    return tok


# ----------------------------------------------------------------------------
# Batches


def lm_batch(rng, tok, batch, seqlen):
    """Packed language documents: [bos] doc [eos] [bos] doc [eos] ..., loss on all tokens."""
    rows = []
    for _ in range(batch):
        row = []
        while len(row) < seqlen + 1:
            row += [tok.bos_id] + tok.encode(D.language_text(rng)) + [tok.eos_id]
        rows.append(row[: seqlen + 1])
    t = torch.tensor(rows)
    return t[:, :-1], t[:, 1:]


def gapped_positions(rng, filler_mask, virtual_len):
    """Position ids 0..virtual_len-1 for a sequence of len(filler_mask) tokens:
    contiguous except for random jumps placed before filler tokens, so facts,
    questions and answers keep their local structure while the distances between
    them look like those of a virtual_len-token context."""
    n = len(filler_mask)
    cand = [i for i, f in enumerate(filler_mask) if f]
    extra = virtual_len - n
    if extra <= 0 or not cand:
        return list(range(n))
    k = min(len(cand), rng.randint(1, 8))
    cuts = sorted(rng.sample(cand, k))
    parts = sorted(rng.randint(0, extra) for _ in range(k - 1))
    sizes = [b - a for a, b in zip([0] + parts, parts + [extra])]
    pos, off, j = [], 0, 0
    for i in range(n):
        while j < k and cuts[j] == i:
            off += sizes[j]
            j += 1
        pos.append(i + off)
    return pos


def retrieval_batch(rng, tok, fc, batch, length, max_len=None, gap_prob=0.0, crowd=False):
    """max_len: the virtual context the position gaps imitate (may exceed any real length).
    crowd: a gapped example of n real tokens imitating a v-token context also weighs
    each filler key as v/n copies (a score bias of log(v/n)), so attention meets the
    crowd of keys of the longer context, not only its distances. Returns key_bias
    [B, T-1] (None without crowd)."""
    ids, masks, poss, bias = [], [], [], []
    for _ in range(batch):
        i, m, info = D.retrieval_example(rng, tok, fc, length)
        ids.append(i)
        masks.append(m)
        b = [0.0] * length
        if max_len and length < max_len and rng.random() < gap_prob:
            v = int(math.exp(rng.uniform(math.log(length), math.log(max_len))))
            poss.append(gapped_positions(rng, info["filler_mask"], v))
            if crowd:
                w = math.log(v / length)
                b = [w if f else 0.0 for f in info["filler_mask"]]
        else:
            poss.append(list(range(length)))
        bias.append(b)
    positions = torch.tensor(poss)[:, :-1]
    key_bias = torch.tensor(bias)[:, :-1] if crowd else None
    ids = torch.tensor(ids)
    mask = torch.tensor(masks, dtype=torch.bool)
    inp, tgt, tm = ids[:, :-1], ids[:, 1:], mask[:, 1:]
    first = int(tm.any(0).nonzero()[0])  # first target column with loss
    n = inp.shape[1] - first
    return inp, tgt[:, first:], tm[:, first:], n, positions, key_bias


def schedule(step, progress, args):
    """(forced minimum of the max retrieval length, lr) at a point of training.
    progress in [0, 1] is step/steps, or elapsed/minutes when a time budget is
    given. The length curriculum is adaptive (see main loop); this floor only
    guarantees that max_len is reached by progress `grow`, starting at `grow_start`.
    lr warms up over 50 steps, then follows a cosine to 10 %."""
    f = min(1.0, max(0.0, (progress - args.grow_start) / (args.grow - args.grow_start)))
    floor = int(args.min_len * (args.max_len / args.min_len) ** f)
    warm = 50
    lr = args.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, progress))))
    if step < warm:
        lr *= (step + 1) / warm
    return floor, lr


def pick_length(rng, cur, args):
    if rng.random() < 0.5:
        L = cur
    else:
        L = int(math.exp(rng.uniform(math.log(args.min_len), math.log(cur))))
    return max(args.min_len, min(args.max_len, L))


# ----------------------------------------------------------------------------
# Evaluation


@torch.no_grad()
def answer_correct(model, prompt, answer):
    """Greedy decoding reproduces `answer` exactly iff the argmax at every answer
    position (teacher-forced on the correct prefix) is the answer token."""
    inp = torch.tensor([prompt + answer[:-1]])
    logits = model(inp, last_n=len(answer))
    pred = logits[0].argmax(-1).tolist()
    return pred == answer


def recall_table(model, tok, lengths, depths, n_per_cell, seed, log_fn=log):
    fc = D.FillerCache(tok)
    rng = random.Random(seed)
    res = {}
    for L in lengths:
        for d in depths:
            ok = 0
            for i in range(n_per_cell):
                prompt, ans, _ = D.eval_prompt(rng, tok, fc, L, d, chat=(i % 2 == 1))
                ok += answer_correct(model, prompt, ans)
            res[(L, d)] = ok / n_per_cell
    hdr = "| context tokens | " + " | ".join(f"depth {int(d * 100)} %" for d in depths) + " |"
    lines = [hdr, "|" + "---|" * (len(depths) + 1)]
    for L in lengths:
        lines.append(f"| {L} | " + " | ".join(f"{100 * res[(L, d)]:.0f} %" for d in depths) + " |")
    if log_fn:
        for ln in lines:
            log_fn(ln)
    return res, "\n".join(lines)


@torch.no_grad()
def generate(model, tok, prompt_ids, n, temperature=0.0, seed=0, stop=()):
    g = torch.Generator().manual_seed(seed)
    ids = list(prompt_ids)
    for _ in range(n):
        logits = model(torch.tensor([ids]), last_n=1)[0, -1]
        if temperature <= 0:
            nxt = int(logits.argmax())
        else:
            nxt = int(torch.multinomial(torch.softmax(logits / temperature, -1), 1, generator=g))
        ids.append(nxt)
        if nxt in stop:
            break
    return ids[len(prompt_ids):]


# ----------------------------------------------------------------------------
# Export


def export_gguf(model, tok, cfg, path, name="kvserve-tiny"):
    w = gguf.GGUFWriter()
    T = gguf.GGUFType
    w.add_string("general.architecture", "llama")
    w.add_string("general.name", name)
    w.add_string("general.description",
                 "Tiny Llama model trained by kvserve's tools/train on synthetic text and long-context retrieval tasks.")
    w.add_uint32("general.file_type", 0)  # all F32
    w.add_uint32("llama.context_length", cfg.max_seq_len)
    w.add_uint32("llama.embedding_length", cfg.dim)
    w.add_uint32("llama.block_count", cfg.n_layers)
    w.add_uint32("llama.feed_forward_length", cfg.ffn_dim)
    w.add_uint32("llama.rope.dimension_count", cfg.head_dim)
    w.add_uint32("llama.attention.head_count", cfg.n_heads)
    w.add_uint32("llama.attention.head_count_kv", cfg.n_kv_heads)
    w.add_float32("llama.attention.layer_norm_rms_epsilon", cfg.norm_eps)
    w.add_float32("llama.rope.freq_base", cfg.rope_base)
    w.add_uint32("llama.vocab_size", cfg.vocab_size)
    w.add_string("tokenizer.ggml.model", "gpt2")
    w.add_string("tokenizer.ggml.pre", "gpt2")
    w.add_array("tokenizer.ggml.tokens", tok.tokens, T.STRING)
    w.add_array("tokenizer.ggml.token_type", tok.token_types(), T.INT32)
    w.add_array("tokenizer.ggml.merges", tok.merges_strings(), T.STRING)
    w.add_uint32("tokenizer.ggml.bos_token_id", tok.bos_id)
    w.add_uint32("tokenizer.ggml.eos_token_id", tok.eos_id)
    w.add_uint32("tokenizer.ggml.eot_token_id", tok.im_end_id)
    w.add_uint32("tokenizer.ggml.padding_token_id", tok.pad_id)
    w.add_bool("tokenizer.ggml.add_bos_token", True)
    w.add_bool("tokenizer.ggml.add_eos_token", False)
    w.add_string("tokenizer.chat_template", CHAT_TEMPLATE)
    sd = {k: v.detach().float().numpy() for k, v in model.state_dict().items()}
    w.add_tensor("token_embd.weight", sd["tok_emb.weight"])
    for i in range(cfg.n_layers):
        p = f"layers.{i}."
        b = f"blk.{i}."
        w.add_tensor(b + "attn_norm.weight", sd[p + "attn_norm.weight"])
        w.add_tensor(b + "attn_q.weight", sd[p + "wq.weight"])
        w.add_tensor(b + "attn_k.weight", sd[p + "wk.weight"])
        w.add_tensor(b + "attn_v.weight", sd[p + "wv.weight"])
        w.add_tensor(b + "attn_output.weight", sd[p + "wo.weight"])
        w.add_tensor(b + "ffn_norm.weight", sd[p + "ffn_norm.weight"])
        w.add_tensor(b + "ffn_gate.weight", sd[p + "w_gate.weight"])
        w.add_tensor(b + "ffn_up.weight", sd[p + "w_up.weight"])
        w.add_tensor(b + "ffn_down.weight", sd[p + "w_down.weight"])
    w.add_tensor("output_norm.weight", sd["norm.weight"])
    w.add_tensor("output.weight", sd["output.weight"])
    n = w.write(path)
    log(f"wrote {path} ({n} bytes)")
    return n


# ----------------------------------------------------------------------------


def save_ckpt(path, model, opt, step, rng, tok, cfg, args, elapsed, cur, ema_acc=0.0):
    tmp = path + ".tmp"
    torch.save(dict(model=model.state_dict(), opt=opt.state_dict(), step=step, rng=rng.getstate(),
                    torch_rng=torch.get_rng_state(), tokens=tok.tokens, merges=tok.merges,
                    cfg=cfg.to_dict(), args=vars(args), elapsed=elapsed, cur=cur, ema_acc=ema_acc), tmp)
    os.replace(tmp, path)


def init_from_gguf(path, ctx):
    """Tokenizer and weights of an exported model, to continue training it (e.g. to a longer context)."""
    from check_gguf import tokenizer_from_gguf, torch_from_gguf
    r = gguf.GGUFReader(path)
    tok = tokenizer_from_gguf(r)
    model = torch_from_gguf(r)
    model.c.max_seq_len = ctx
    return model.c, tok, model


def load_ckpt(path):
    ck = torch.load(path)
    cfg = Config(**ck["cfg"])
    tok = Tokenizer(ck["tokens"], [tuple(m) for m in ck["merges"]])
    model = Llama(cfg)
    model.load_state_dict(ck["model"])
    return ck, cfg, tok, model


def final_report(model, tok, cfg, args):
    model.eval()
    lengths = [int(x) for x in args.eval_lengths.split(",")]
    depths = [0.1, 0.5, 0.9]
    res, table = recall_table(model, tok, lengths, depths, args.eval_n, seed=args.seed + 1000)
    samples = []
    for text in ["Once upon a time,", "The sky is"]:
        ids = [tok.bos_id] + tok.encode(text)
        out = generate(model, tok, ids, 60, stop=(tok.eos_id,))
        samples.append(("plain", text + tok.decode(out)))
    for q in ["Hello!", "What color is the grass?", "What is 3 plus 4?", "Tell me a story about Mia."]:
        ids = [tok.bos_id] + tok.encode(D.render_chat([("user", q)], add_generation_prompt=True))
        out = generate(model, tok, ids, 80, stop=(tok.im_end_id, tok.eos_id))
        samples.append(("chat", q + " -> " + tok.decode(out)))
    for kind, s in samples:
        log(f"sample [{kind}]: {s!r}")
    return res, table, samples


def write_recall_cases(tok, path, seed, lengths, depths, per_cell=2):
    """JSONL prompts (text without the leading bos) for measuring recall through kvserve."""
    fc = D.FillerCache(tok)
    rng = random.Random(seed)
    with open(path, "w") as f:
        for L in lengths:
            for d in depths:
                for i in range(per_cell):
                    chat = i % 2 == 1
                    prompt, ans, info = D.eval_prompt(rng, tok, fc, L, d, chat=chat)
                    text = tok.decode(prompt[1:])  # drop bos: kvserve adds it (add_bos_token)
                    assert tok.encode(text) == prompt[1:]
                    rec = dict(tokens=L, depth=d, format="chat" if chat else "plain",
                               prompt=text, prompt_tokens=len(prompt), expected=tok.decode(ans),
                               pass_key=info["facts"][0]["value"])
                    if chat:
                        user = text[len("<|im_start|>user\n"):text.index("<|im_end|>")]
                        rec["messages"] = [{"role": "user", "content": user}]
                    f.write(json.dumps(rec) + "\n")
    log(f"wrote {path}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.path.dirname(HERE), "..", "models", "kvserve-tiny.gguf"))
    ap.add_argument("--workdir", default=os.path.join(HERE, "out"))
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--vocab", type=int, default=2048)
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--ffn", type=int, default=384)
    ap.add_argument("--ctx", type=int, default=4096)
    ap.add_argument("--rope-base", type=float, default=1e6)
    ap.add_argument("--steps", type=int, default=1400)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--min-len", type=int, default=96)
    ap.add_argument("--max-len", type=int, default=4096)
    ap.add_argument("--grow-start", type=float, default=0.5)
    ap.add_argument("--grow", type=float, default=0.8,
                    help="progress by which max-len is reached even if accuracy lags")
    ap.add_argument("--grow-every", type=int, default=20)
    ap.add_argument("--gap-prob", type=float, default=0.7,
                    help="fraction of retrieval examples whose position ids get gaps (virtual length up to max-len)")
    ap.add_argument("--virtual-len", type=int, default=0,
                    help="context the position gaps imitate (default --max-len); may exceed the longest real example")
    ap.add_argument("--crowd", action="store_true",
                    help="gapped examples also weigh filler keys as the longer context's count of them")
    ap.add_argument("--start-len", type=int, default=0, help="initial longest retrieval length (default --min-len)")
    ap.add_argument("--init-from", default="",
                    help="start from this exported GGUF (its tokenizer and weights) instead of from scratch")
    ap.add_argument("--name", default="kvserve-tiny", help="general.name of the exported model")
    ap.add_argument("--recall-lengths", default="1024,2048,4096",
                    help="context lengths of the prompts written to <out>.recall.jsonl")
    ap.add_argument("--grow-acc", type=float, default=0.55)
    ap.add_argument("--tokens-per-step", type=int, default=4096)
    ap.add_argument("--lm-batch", type=int, default=4)
    ap.add_argument("--lm-len", type=int, default=128)
    ap.add_argument("--lm-weight", type=float, default=0.5)
    ap.add_argument("--ckpt-every", type=int, default=50)
    ap.add_argument("--eval-every", type=int, default=150)
    ap.add_argument("--eval-lengths", default="256,512,1024,2048,4096")
    ap.add_argument("--eval-n", type=int, default=20)
    ap.add_argument("--minutes", type=float, default=0,
                    help="train for this wall-clock budget instead of --steps (schedule follows elapsed time)")
    ap.add_argument("--threads", type=int, default=1,
                    help="torch threads; 1 is much faster than 2 when the cores are contended")
    ap.add_argument("--resume", action="store_true")
    ap.add_argument("--export-only", action="store_true")
    ap.add_argument("--no-final-eval", action="store_true")
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    os.makedirs(args.workdir, exist_ok=True)
    ckpt_path = os.path.join(args.workdir, "ckpt.pt")
    out = os.path.abspath(args.out)

    if args.export_only:
        ck, cfg, tok, model = load_ckpt(ckpt_path)
        log(f"checkpoint at step {ck['step']} ({ck['elapsed'] / 60:.1f} min of training)")
        export_gguf(model, tok, cfg, out, name=args.name)
        # The recall prompts beside it, as a finished run writes them.
        write_recall_cases(tok, os.path.splitext(out)[0] + ".recall.jsonl", args.seed + 2000,
                           [int(x) for x in args.recall_lengths.split(",")], [0.1, 0.5, 0.9])
        if not args.no_final_eval:
            final_report(model, tok, cfg, args)
        return

    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    rng = random.Random(args.seed)

    if args.resume and os.path.exists(ckpt_path):
        ck, cfg, tok, model = load_ckpt(ckpt_path)
        opt = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.95), weight_decay=0.05)
        opt.load_state_dict(ck["opt"])
        step = ck["step"]
        rng.setstate(ck["rng"])
        torch.set_rng_state(ck["torch_rng"])
        elapsed0 = ck["elapsed"]
        log(f"resumed at step {step}")
    elif args.init_from:
        cfg, tok, model = init_from_gguf(args.init_from, args.ctx)
        model.train()
        opt = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.95), weight_decay=0.05)
        step = 0
        elapsed0 = 0.0
        log(f"initialised from {args.init_from}")
    else:
        tok = build_tokenizer(args.seed, args.vocab)
        cfg = Config(vocab_size=tok.vocab_size, dim=args.dim, n_layers=args.layers, n_heads=args.heads,
                     n_kv_heads=args.kv_heads, ffn_dim=args.ffn, max_seq_len=args.ctx,
                     rope_base=args.rope_base)
        model = Llama(cfg)
        opt = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.95), weight_decay=0.05)
        step = 0
        elapsed0 = 0.0
    log(f"config {cfg.to_dict()}, params {model.n_params()}")
    fc = D.FillerCache(tok)
    digit_mask = torch.tensor([t in "0123456789" for t in tok.tokens])
    t0 = time.time()
    ema_r = ema_l = None
    ema_acc = 0.0
    if step == 0 or not args.resume:
        cur = max(args.min_len, args.start_len)
    else:
        cur = ck.get("cur", args.min_len)
        ema_acc = ck.get("ema_acc", 0.0)
    while args.minutes or step < args.steps:
        if args.minutes:
            progress = (elapsed0 + time.time() - t0) / (60 * args.minutes)
            if progress >= 1.0:
                break
        else:
            progress = step / args.steps
        floor, lr = schedule(step, progress, args)
        # Adaptive length curriculum: grow the longest retrieval length by 25 % every
        # grow_every steps while answer-digit accuracy (EMA over training batches) is high.
        if step % args.grow_every == 0 and step > 0 and ema_acc >= args.grow_acc:
            cur = int(cur * 1.25)
        cur = min(args.max_len, max(cur, floor))
        for g in opt.param_groups:
            g["lr"] = lr
        L = pick_length(rng, cur, args)
        B = max(1, args.tokens_per_step // L)
        model.train()
        inp, tgt, tm, n, pos, kb = retrieval_batch(rng, tok, fc, B, L, args.virtual_len or args.max_len,
                                                     args.gap_prob, args.crowd)
        logits = model(inp, last_n=n, positions=pos, key_bias=kb)
        lr_loss = F.cross_entropy(logits[tm], tgt[tm])
        with torch.no_grad():
            dm = tm & digit_mask[tgt]
            acc = (logits.argmax(-1)[dm] == tgt[dm]).float().mean().item()
        ema_acc = 0.9 * ema_acc + 0.1 * acc
        li, lt = lm_batch(rng, tok, args.lm_batch, args.lm_len)
        lm_loss = F.cross_entropy(model(li).flatten(0, 1), lt.flatten())
        loss = lr_loss + args.lm_weight * lm_loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        ema_r = lr_loss.item() if ema_r is None else 0.95 * ema_r + 0.05 * lr_loss.item()
        ema_l = lm_loss.item() if ema_l is None else 0.95 * ema_l + 0.05 * lm_loss.item()
        elapsed = elapsed0 + time.time() - t0
        if step % 10 == 0:
            log(f"step {step} len {L}x{B} (max {cur}) lr {lr:.2e} ret_loss {ema_r:.4f} digit_acc {ema_acc:.3f} lm_loss {ema_l:.4f} "
                f"elapsed {elapsed / 60:.1f} min")
        if step % args.ckpt_every == 0 or step == args.steps:
            save_ckpt(ckpt_path, model, opt, step, rng, tok, cfg, args, elapsed, cur, ema_acc)
        if step % args.eval_every == 0:
            model.eval()
            lens = [x for x in (256, 1024, 4096, 8192) if x <= max(cur, 256)]
            recall_table(model, tok, lens, [0.1, 0.5, 0.9], 2, seed=args.seed + 7)
    elapsed = elapsed0 + time.time() - t0
    save_ckpt(ckpt_path, model, opt, step, rng, tok, cfg, args, elapsed, cur, ema_acc)
    log(f"training done: {step} steps, {elapsed / 60:.1f} min")
    export_gguf(model, tok, cfg, out, name=args.name)
    write_recall_cases(tok, os.path.splitext(out)[0] + ".recall.jsonl", args.seed + 2000,
                       [int(x) for x in args.recall_lengths.split(",")], [0.1, 0.5, 0.9])
    if not args.no_final_eval:
        final_report(model, tok, cfg, args)


if __name__ == "__main__":
    main()
