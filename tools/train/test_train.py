#!/usr/bin/python3
"""Quick checks for tools/gguf.py, the tokenizer and the model (a few seconds on CPU).

    /usr/bin/python3 tools/train/test_train.py
"""

import math
import os
import random
import struct
import sys
import tempfile

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

import gguf  # noqa: E402
import data as D  # noqa: E402
import model as M  # noqa: E402
from tokenizer import Tokenizer, gpt2_split, verify_split  # noqa: E402


def test_gguf_roundtrip():
    T = gguf.GGUFType
    w = gguf.GGUFWriter()
    vals = [("u8", 200, T.UINT8), ("i8", -5, T.INT8), ("u16", 60000, T.UINT16), ("i16", -300, T.INT16),
            ("u32", 4000000000, T.UINT32), ("i32", -7, T.INT32), ("f32", 1.5, T.FLOAT32), ("b", True, T.BOOL),
            ("s", "héllo", T.STRING), ("u64", 2 ** 40, T.UINT64), ("i64", -2 ** 40, T.INT64),
            ("f64", 0.1, T.FLOAT64)]
    for k, v, t in vals:
        w.add(k, v, t)
    w.add_array("arr.i32", [1, -2, 3], T.INT32)
    w.add_array("arr.str", ["a", "", "ü z"], T.STRING)
    w.add_array("arr.nested", [(T.UINT8, [1, 2]), (T.STRING, ["x"])], T.ARRAY)
    a = np.arange(2 * 3 * 5, dtype=np.float32).reshape(2, 3, 5)
    b = (np.arange(7, dtype=np.float32) / 3).astype(np.float16)
    w.add_tensor("a", a)
    w.add_tensor("b", b, gguf.GGML_TYPE_F16)
    raw = w.to_bytes()
    r = gguf.GGUFReader(raw)
    for k, v, t in vals:
        assert r.metadata[k] == v, (k, r.metadata[k])
        assert r.metadata_types[k][0] == t
    assert r.metadata["arr.i32"] == [1, -2, 3]
    assert r.metadata["arr.str"] == ["a", "", "ü z"]
    assert r.metadata["arr.nested"] == [[1, 2], ["x"]]
    assert r.tensor_infos[0].dims == [5, 3, 2]  # ne[0] (contiguous) first
    assert np.array_equal(r.tensors["a"], a)
    assert r.tensors["b"].dtype == np.float16 and np.array_equal(r.tensors["b"], b)
    assert r.data_offset % 32 == 0 and all(ti.offset % 32 == 0 for ti in r.tensor_infos)
    # Header layout: magic, version 3, n_tensors, n_kv.
    assert raw[:4] == b"GGUF" and struct.unpack("<IQQ", raw[4:24]) == (3, 2, len(vals) + 3)
    # Truncation is reported, not crashed on.
    try:
        gguf.GGUFReader(raw[:100])
        raise AssertionError("truncated file accepted")
    except gguf.GGUFError:
        pass
    with tempfile.NamedTemporaryFile(suffix=".gguf") as f:
        w.write(f.name)
        assert gguf.GGUFReader(f.name).metadata["s"] == "héllo"


def test_split():
    assert gpt2_split("Hello world's  end 123abc!!\n\nx  ") == \
        ["Hello", " world", "'s", " ", " end", " 123", "abc", "!!", "\n", "\n", "x", "  "]
    # Non-ASCII letters and numbers follow unicode categories (\p{L}, \p{N}).
    assert gpt2_split("naïve café ½ Ωmega") == ["naïve", " café", " ½", " Ωmega"]
    rng = random.Random(0)
    texts = [D.language_text(rng) for _ in range(200)] + ["a  b\t\tc \n d' 'll 're x'y ..."]
    assert verify_split(texts) == len(texts)


def test_tokenizer_digits():
    rng = random.Random(0)
    texts = [D.language_text(rng) for _ in range(300)] + ["The pass key is 12345. 67 89"] * 5
    tok = Tokenizer.train(texts, 600, log=lambda *a: None)
    ids = tok.encode(" 90210")
    assert len(ids) == 6 and tok.decode(ids) == " 90210"
    s = "<|im_start|>user\nHi there!<|im_end|>\n"
    ids = tok.encode(s)
    assert ids[0] == tok.im_start_id and tok.im_end_id in ids and tok.decode(ids) == s


def test_chunked_attention_matches_full():
    torch.manual_seed(0)
    c = M.Config(vocab_size=50, dim=32, n_layers=2, n_heads=4, n_kv_heads=2, ffn_dim=64, rope_base=1e6)
    m = M.Llama(c).eval()
    ids = torch.randint(0, 50, (2, 1100))
    with torch.no_grad():
        old = M.ATTN_CHUNK
        try:
            M.ATTN_CHUNK = 4096
            full = m(ids)
            M.ATTN_CHUNK = 256
            chunked = m(ids)
            tail = m(ids, last_n=37)
        finally:
            M.ATTN_CHUNK = old
    assert torch.allclose(full, chunked, atol=1e-5)
    assert torch.allclose(full[:, -37:], tail, atol=1e-5)


def test_init_from_gguf_continues_the_exported_model():
    """--init-from: the exported file's tokenizer and weights come back exactly, with the new context."""
    import train as TR
    rng = random.Random(1)
    tok = Tokenizer.train([D.language_text(rng) for _ in range(200)], 400, log=lambda *a: None)
    torch.manual_seed(3)
    c = M.Config(vocab_size=tok.vocab_size, dim=32, n_layers=2, n_heads=4, n_kv_heads=2, ffn_dim=64,
                 max_seq_len=512, rope_base=1e6)
    m = M.Llama(c).eval()
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "m.gguf")
        TR.log = lambda *a: None
        TR.export_gguf(m, tok, c, path, name="t")
        c2, tok2, m2 = TR.init_from_gguf(path, 2048)
    assert c2.max_seq_len == 2048 and c2.dim == 32 and c2.n_kv_heads == 2
    assert tok2.tokens == tok.tokens and tok2.merges == tok.merges
    ids = torch.tensor([[1, 5, 9, 30, 2]])
    with torch.no_grad():
        assert torch.equal(m(ids), m2(ids))


def test_key_bias_weighs_a_key_as_copies():
    """A key bias of log(m) equals m copies of that token (same position) for later queries (one layer)."""
    torch.manual_seed(5)
    c = M.Config(vocab_size=50, dim=32, n_layers=1, n_heads=4, n_kv_heads=2, ffn_dim=64, rope_base=1e6)
    m = M.Llama(c).eval()
    ids = [3, 17, 8, 22, 9, 41, 5]
    j, copies = 2, 5
    bias = torch.zeros(1, len(ids))
    bias[0, j] = math.log(copies)
    dup = ids[:j] + [ids[j]] * copies + ids[j + 1:]
    pos = list(range(j)) + [j] * copies + list(range(j + 1, len(ids)))
    with torch.no_grad():
        a = m(torch.tensor([ids]), key_bias=bias)[0, j + 1:]
        b = m(torch.tensor([dup]), positions=torch.tensor([pos]))[0, j + copies:]
    assert torch.allclose(a, b, atol=1e-5), (a - b).abs().max()


if __name__ == "__main__":
    for name, fn in list(globals().items()):
        if name.startswith("test_"):
            fn()
            print("ok", name)
