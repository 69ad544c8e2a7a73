"""Byte-level BPE tokenizer (GPT-2 style), trained by the project's own code.

- Bytes are mapped to printable unicode characters the way GPT-2 does
  (printable Latin-1 bytes map to themselves, the rest to U+0100 upwards).
- Pre-tokenization implements the GPT-2 split regex
      's|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+
  with a hand-written scanner over unicodedata categories (Python's `re`
  has no \\p{L}); `verify_split` checks it against an ASCII-only `re` form.
- Merges never involve a character that is a digit, so every digit is its own
  token and an N-digit number encodes to N tokens (plus a leading "Ġ" token
  when preceded by a space).
- Special tokens are appended after the byte and merge tokens.
"""

import collections
import re
import unicodedata

SPECIAL_TOKENS = ["<|bos|>", "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|pad|>"]

TOKEN_TYPE_NORMAL = 1
TOKEN_TYPE_CONTROL = 3


def bytes_to_unicode():
    """GPT-2's reversible byte -> printable-char table."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


BYTE_ENCODER = bytes_to_unicode()
BYTE_DECODER = {c: b for b, c in BYTE_ENCODER.items()}


def _is_letter(ch):
    return unicodedata.category(ch)[0] == "L"


def _is_number(ch):
    return unicodedata.category(ch)[0] == "N"


def _is_space(ch):
    return ch.isspace()


def _is_other(ch):
    return not (_is_space(ch) or _is_letter(ch) or _is_number(ch))


_CONTRACTIONS = ("s", "t", "re", "ve", "m", "ll", "d")


def gpt2_split(text):
    """Split text into pre-tokens exactly as the GPT-2 regex (leftmost alternative wins)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        # 's|'t|'re|'ve|'m|'ll|'d
        if c == "'":
            hit = None
            for suf in _CONTRACTIONS:
                if text.startswith(suf, i + 1):
                    hit = suf
                    break
            if hit is not None:
                out.append(text[i:i + 1 + len(hit)])
                i += 1 + len(hit)
                continue
        # ` ?X+` for X in letters, numbers, others
        j = i + 1 if (c == " " and i + 1 < n) else i
        matched = False
        for cls in (_is_letter, _is_number, _is_other):
            if cls(text[j]) and not (j == i and c == " "):
                k = j
                while k < n and cls(text[k]):
                    k += 1
                out.append(text[i:k])
                i = k
                matched = True
                break
        if matched:
            continue
        # \s+(?!\S) | \s+
        k = i
        while k < n and _is_space(text[k]):
            k += 1
        if k == n:
            out.append(text[i:k])
            i = k
        elif k - i >= 2:
            out.append(text[i:k - 1])  # leave one space to prefix the next word
            i = k - 1
        else:
            out.append(text[i:k])
            i = k
    return out


_ASCII_GPT2_RE = re.compile(
    r"""'s|'t|'re|'ve|'m|'ll|'d| ?[A-Za-z]+| ?[0-9]+| ?[^\sA-Za-z0-9]+|\s+(?!\S)|\s+""", re.ASCII)


def verify_split(texts):
    """Check gpt2_split against the ASCII form of the regex on ASCII texts. Returns count checked."""
    checked = 0
    for t in texts:
        if not t.isascii():
            continue
        got = gpt2_split(t)
        want = _ASCII_GPT2_RE.findall(t)
        if got != want:
            raise AssertionError(f"split mismatch on {t[:80]!r}: {got[:20]} vs {want[:20]}")
        checked += 1
    return checked


def _to_symbols(word):
    return "".join(BYTE_ENCODER[b] for b in word.encode("utf-8"))


def _has_digit(s):
    return any(BYTE_DECODER[ch] in range(0x30, 0x3A) for ch in s)


class Tokenizer:
    def __init__(self, tokens, merges):
        self.tokens = list(tokens)  # id -> token string (byte-encoded)
        self.merges = list(merges)  # list of (a, b)
        self.token_to_id = {t: i for i, t in enumerate(self.tokens)}
        self.ranks = {m: r for r, m in enumerate(self.merges)}
        self.special = {t: self.token_to_id[t] for t in SPECIAL_TOKENS}
        self.bos_id = self.special["<|bos|>"]
        self.eos_id = self.special["<|endoftext|>"]
        self.im_start_id = self.special["<|im_start|>"]
        self.im_end_id = self.special["<|im_end|>"]
        self.pad_id = self.special["<|pad|>"]
        self._cache = {}
        self._special_re = re.compile("(" + "|".join(re.escape(s) for s in SPECIAL_TOKENS) + ")")

    @property
    def vocab_size(self):
        return len(self.tokens)

    def token_types(self):
        return [TOKEN_TYPE_CONTROL if t in self.special else TOKEN_TYPE_NORMAL for t in self.tokens]

    # -- training ------------------------------------------------------------
    @classmethod
    def train(cls, texts, vocab_size, log=print):
        words = collections.Counter()
        for t in texts:
            for w in gpt2_split(t):
                words[_to_symbols(w)] += 1
        base = [BYTE_ENCODER[b] for b in range(256)]
        seqs = [(list(w), c) for w, c in words.items()]
        merges = []
        n_merges = vocab_size - 256 - len(SPECIAL_TOKENS)
        # Naive but adequate: the templated corpus has a few thousand distinct words.
        while len(merges) < n_merges:
            pairs = collections.Counter()
            for syms, c in seqs:
                for a, b in zip(syms, syms[1:]):
                    pairs[(a, b)] += c
            best = None
            for (a, b), c in pairs.most_common():
                if _has_digit(a) or _has_digit(b):
                    continue  # keep digits as single tokens
                best = (a, b)
                break
            if best is None or pairs[best] < 2:
                break
            merges.append(best)
            a, b = best
            ab = a + b
            for syms, _ in seqs:
                i = 0
                while i < len(syms) - 1:
                    if syms[i] == a and syms[i + 1] == b:
                        syms[i:i + 2] = [ab]
                    i += 1
        tokens = base + [a + b for a, b in merges] + SPECIAL_TOKENS
        log(f"tokenizer: {len(words)} distinct pre-tokens, {len(merges)} merges, vocab {len(tokens)}")
        return cls(tokens, merges)

    # -- encoding ------------------------------------------------------------
    def _bpe(self, word):
        if word in self._cache:
            return self._cache[word]
        syms = list(word)
        while len(syms) > 1:
            best, best_rank = None, None
            for i in range(len(syms) - 1):
                r = self.ranks.get((syms[i], syms[i + 1]))
                if r is not None and (best_rank is None or r < best_rank):
                    best, best_rank = i, r
            if best is None:
                break
            syms[best:best + 2] = [syms[best] + syms[best + 1]]
        ids = [self.token_to_id[s] for s in syms]
        self._cache[word] = ids
        return ids

    def encode(self, text, allow_special=True):
        ids = []
        parts = self._special_re.split(text) if allow_special else [text]
        for p in parts:
            if not p:
                continue
            if allow_special and p in self.special:
                ids.append(self.special[p])
                continue
            for w in gpt2_split(p):
                ids.extend(self._bpe(_to_symbols(w)))
        return ids

    def decode(self, ids):
        out = bytearray()
        for i in ids:
            t = self.tokens[i]
            if t in self.special:
                out += t.encode("utf-8")
            else:
                out += bytes(BYTE_DECODER[ch] for ch in t)
        return out.decode("utf-8", errors="replace")

    def merges_strings(self):
        return [f"{a} {b}" for a, b in self.merges]
