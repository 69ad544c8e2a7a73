"""Synthetic training data, generated from fixed word lists and templates (no downloads).

Two families:
- language: small stories, templated facts about the world, and ChatML dialogues,
  trained with a loss on every token;
- retrieval: facts (a pass key, a person's secret number, a city's code) planted
  at chosen depths inside low-entropy filler, followed by one or more
  question/answer pairs, as plain text or as a ChatML conversation; the loss is
  on the answers only.

All randomness comes from the `random.Random` passed in, so data is reproducible.
"""

NAMES = """Alice Bob Carol David Emma Frank Grace Henry Iris Jack Kate Leo Mia Noah Olivia Paul
Quinn Rose Sam Tina Uma Victor Wendy Xavier Yara Zoe Anna Ben Clara Dan Eva Finn Gina Hugo
Ivy Jonas Lily Max Nina Oscar Pia Ray Sara Tom Vera Will Amy Carl Dora Eli Fay Gus Hana Ian
Jane Kim Luke Mona Ned Omar Peter Ruth Steve Tara Ugo Val""".split()

CITIES = """Paris London Berlin Madrid Rome Vienna Prague Warsaw Oslo Dublin Lisbon Athens Cairo
Tokyo Seoul Delhi Lima Quito Boston Denver Dallas Austin Chicago Seattle Toronto Sydney Perth
Nairobi Lagos Dakar Milan Naples Munich Hamburg Zurich Geneva Lyon Nice Porto Seville Bergen
Riga Vilnius Tallinn Helsinki Stockholm Copenhagen Brussels Amsterdam Krakow Budapest Sofia
Bucharest Istanbul Ankara Tunis Algiers Manila Hanoi Bangkok Jakarta Osaka Kyoto Havana""".split()

ANIMALS = """cat dog bird fox rabbit bear mouse horse duck frog owl lion tiger goat sheep cow pig
wolf deer turtle""".split()
COLORS = "red blue green yellow white black brown orange purple pink gray".split()
OBJECTS = """ball book box cup hat kite boat tree flower apple cake toy car bike shoe key map lamp
bell drum""".split()
PLACES = """garden forest park river house school beach hill village farm lake field kitchen
town market""".split()
FOODS = "bread soup rice fish cheese apples carrots milk honey cookies eggs pie".split()
ADJS = "happy sad small big kind brave quiet funny tired hungry clever shy old young".split()
FEELINGS = "happy glad proud calm excited sleepy".split()
WEATHER = "sunny rainy windy cold warm cloudy snowy".split()
DAYS = "Monday Tuesday Wednesday Thursday Friday Saturday Sunday".split()

# Low-entropy filler: a small pool of plain sentences without digits or fact words.
FILLER = [
    "The grass is green.", "The sky is blue.", "The sun is yellow.", "Here we go.",
    "There and back again.", "The river flows slowly.", "Birds sing in the morning.",
    "The wind is soft today.", "A small boat sails on the lake.", "The trees are tall.",
    "The road goes on and on.", "Clouds move across the sky.", "The night is quiet.",
    "Flowers grow in the field.", "The hills are far away.", "Rain falls on the roof.",
    "The stars shine at night.", "A cat sleeps in the sun.", "The sea is wide and deep.",
    "Leaves fall in the autumn.",
]


def _digits(rng, n):
    return str(rng.randint(1, 9)) + "".join(str(rng.randint(0, 9)) for _ in range(n - 1))


# ----------------------------------------------------------------------------
# Language data


def story(rng):
    n, a, c, o, p = rng.choice(NAMES), rng.choice(ANIMALS), rng.choice(COLORS), rng.choice(OBJECTS), rng.choice(PLACES)
    adj, f, w = rng.choice(ADJS), rng.choice(FOODS), rng.choice(WEATHER)
    friend = rng.choice([x for x in NAMES if x != n])
    s = [
        f"Once upon a time, there was a {adj} {a} named {n}.",
        f"{n} lived near the {p} and liked to eat {f}.",
        f"One {w} day, {n} found a {c} {o} in the {p}.",
        rng.choice([
            f"{n} showed the {o} to {friend}, and they played with it all day.",
            f"{n} did not know who owned the {o}, so {n} asked {friend}.",
            f"{n} was very {rng.choice(FEELINGS)} and ran home to tell {friend}.",
        ]),
        rng.choice([
            f"\"This is the best {o} in the world,\" said {friend}.",
            f"\"Can I try?\" asked {friend}. \"Yes, you can,\" said {n}.",
            f"{friend} smiled and said, \"Let's share it.\"",
        ]),
        rng.choice([
            f"In the end, {n} and {friend} became good friends.",
            f"That night, {n} went to sleep feeling {rng.choice(FEELINGS)}.",
            f"From that day on, {n} always went back to the {p}.",
        ]),
    ]
    return " ".join(s)


def world_facts(rng):
    k = rng.randint(3, 6)
    out = []
    for _ in range(k):
        t = rng.randrange(8)
        if t == 0:
            out.append(f"The {rng.choice(ANIMALS)} is in the {rng.choice(PLACES)}.")
        elif t == 1:
            out.append(f"{rng.choice(NAMES)} has a {rng.choice(COLORS)} {rng.choice(OBJECTS)}.")
        elif t == 2:
            out.append(f"On {rng.choice(DAYS)}, it was {rng.choice(WEATHER)} in {rng.choice(CITIES)}.")
        elif t == 3:
            a, b = rng.randint(1, 9), rng.randint(1, 9)
            out.append(f"{a} plus {b} is {a + b}.")
        elif t == 4:
            out.append(f"{rng.choice(NAMES)} likes to eat {rng.choice(FOODS)}.")
        elif t == 5:
            out.append(f"{rng.choice(CITIES)} is a big city.")
        elif t == 6:
            out.append(f"The {rng.choice(OBJECTS)} is {rng.choice(COLORS)}.")
        else:
            out.append(rng.choice(FILLER))
    return " ".join(out)


def chat_turns(rng):
    """A short dialogue as a list of (role, content)."""
    t = rng.randrange(6)
    n = rng.choice(NAMES)
    if t == 0:
        return [("user", rng.choice(["Hello!", "Hi!", "Hello, who are you?", "Hi there."])),
                ("assistant", rng.choice(["Hello! How can I help you today?",
                                          "Hi! I am a small assistant. How can I help?"]))]
    if t == 1:
        a, b = rng.randint(1, 9), rng.randint(1, 9)
        return [("user", f"What is {a} plus {b}?"), ("assistant", f"{a} plus {b} is {a + b}.")]
    if t == 2:
        thing, col = rng.choice([("sky", "blue"), ("grass", "green"), ("sun", "yellow"), ("snow", "white")])
        return [("user", f"What color is the {thing}?"), ("assistant", f"The {thing} is {col}.")]
    if t == 3:
        return [("user", f"Tell me a story about {n}."), ("assistant", story_about(rng, n))]
    if t == 4:
        return [("user", rng.choice(["Thank you!", "Thanks."])),
                ("assistant", rng.choice(["You are welcome!", "Happy to help."]))]
    c, o = rng.choice(COLORS), rng.choice(OBJECTS)
    return [("user", f"{n} has a {c} {o}. What color is the {o} of {n}?"),
            ("assistant", f"The {o} of {n} is {c}.")]


def story_about(rng, n):
    s = story(rng)
    first = s.split(" named ")[1].split(".")[0]
    return s.replace(first, n)


def render_chat(turns, add_generation_prompt=False):
    """ChatML rendering, identical to the GGUF chat template (without bos)."""
    s = "".join(f"<|im_start|>{r}\n{c}<|im_end|>\n" for r, c in turns)
    if add_generation_prompt:
        s += "<|im_start|>assistant\n"
    return s


def language_text(rng):
    r = rng.random()
    if r < 0.45:
        return story(rng)
    if r < 0.7:
        return world_facts(rng)
    turns = []
    for _ in range(rng.randint(1, 2)):
        turns += chat_turns(rng)
    return render_chat(turns)


# ----------------------------------------------------------------------------
# Retrieval data

FACT_KINDS = ("passkey", "number", "code")


def make_fact(rng, kind, used, ndigits):
    v = _digits(rng, ndigits)
    if kind == "passkey":
        return dict(kind=kind, value=v,
                    fact=f"The pass key is {v}. Remember it.",
                    question="What is the pass key?", prefix="The pass key is")
    if kind == "number":
        n = rng.choice([x for x in NAMES if ("n", x) not in used])
        used.add(("n", n))
        return dict(kind=kind, value=v,
                    fact=f"The secret number of {n} is {v}.",
                    question=f"What is the secret number of {n}?", prefix=f"The secret number of {n} is")
    c = rng.choice([x for x in CITIES if ("c", x) not in used])
    used.add(("c", c))
    return dict(kind=kind, value=v,
                fact=f"The code for {c} is {v}.",
                question=f"What is the code for {c}?", prefix=f"The code for {c} is")


class FillerCache:
    """Token ids of filler sentences (each encoded with a leading space, so
    concatenation equals encoding the joined text)."""

    def __init__(self, tok):
        self.tok = tok
        self.sent = [tok.encode(" " + s) for s in FILLER]

    def filler(self, rng, n_tokens):
        """Return a list of sentences (token lists) totalling exactly n_tokens
        (the last one may be cut)."""
        out, total = [], 0
        while total < n_tokens:
            s = self.sent[rng.randrange(len(self.sent))]
            s = s[: n_tokens - total]
            out.append(s)
            total += len(s)
        return out


def retrieval_example(rng, tok, fc, total_len, chat=None, n_facts=None, n_questions=None,
                      depths=None, kinds=None, ndigits=None):
    """Build one retrieval example of exactly `total_len` tokens.

    Returns (ids, loss_mask, info) where loss_mask marks answer tokens (targets are
    ids shifted by one: mask[i] means "predict ids[i] from ids[:i]").
    """
    if chat is None:
        chat = rng.random() < 0.5
    if n_facts is None:
        n_facts = rng.choice([1, 2, 3, 3])
    if kinds is None:
        kinds = []
        for _ in range(n_facts):
            k = rng.choice(FACT_KINDS)
            while k == "passkey" and "passkey" in kinds:
                k = rng.choice(("number", "code"))
            kinds.append(k)
    used = set()
    facts = [make_fact(rng, k, used, ndigits or rng.randint(3, 7)) for k in kinds]
    if n_questions is None:
        n_questions = len(facts) if rng.random() < 0.75 else rng.randint(1, len(facts))
    asked = rng.sample(range(len(facts)), n_questions)

    # Encode the fixed parts.
    bos = [tok.bos_id]
    if chat:
        head = tok.encode("<|im_start|>user\n")
        # First question goes in the user turn; each further question is a new user turn.
        tail, mask_tail = [], []
        for qi, fi in enumerate(asked):
            f = facts[fi]
            if qi == 0:
                q = tok.encode("\n" + f["question"] + "<|im_end|>\n<|im_start|>assistant\n")
            else:
                q = tok.encode("<|im_start|>user\n" + f["question"] + "<|im_end|>\n<|im_start|>assistant\n")
            a = tok.encode(f"{f['prefix']} {f['value']}.<|im_end|>\n")
            tail += q + a
            mask_tail += [0] * len(q) + [1] * (len(a) - 1) + [0]  # no loss on the final "\n"
    else:
        head = []
        tail, mask_tail = [], []
        for fi in asked:
            f = facts[fi]
            q = tok.encode(f" {f['question']} {f['prefix']}")
            a = tok.encode(f" {f['value']}.")
            tail += q + a
            mask_tail += [0] * len(q) + [1] * len(a)
    fact_ids = [tok.encode(" " + f["fact"]) for f in facts]
    n_fill = total_len - len(bos) - len(head) - len(tail) - sum(len(x) for x in fact_ids)
    if n_fill < 4:
        if len(facts) > 1 and depths is None:  # too many facts for a short example
            return retrieval_example(rng, tok, fc, total_len, chat=chat, n_facts=1, n_questions=1,
                                     ndigits=ndigits)
        raise ValueError("total_len too small")
    sents = fc.filler(rng, n_fill)
    # Insert facts at sentence boundaries nearest to their depths.
    if depths is None:
        depths = [rng.random() for _ in facts]
    bounds = [0]
    for s in sents:
        bounds.append(bounds[-1] + len(s))
    slots = []
    for d in depths:
        target = d * n_fill
        slots.append(min(range(len(bounds)), key=lambda b: abs(bounds[b] - target)))
    order = sorted(range(len(facts)), key=lambda i: (slots[i], i))
    body = []
    body_filler = []  # 1 where the body token is filler (a position gap may precede it)
    oi = 0
    for si in range(len(sents) + 1):
        while oi < len(order) and slots[order[oi]] == si:
            body += fact_ids[order[oi]]
            body_filler += [0] * len(fact_ids[order[oi]])
            oi += 1
        if si < len(sents):
            body += sents[si]
            body_filler += [1] * len(sents[si])
    ids = bos + head + body + tail
    mask = [0] * (len(ids) - len(tail)) + mask_tail
    assert len(ids) == total_len, (len(ids), total_len)
    filler_mask = [0] * (len(bos) + len(head)) + body_filler + [0] * len(tail)
    info = dict(facts=facts, asked=asked, chat=chat, depths=depths, filler_mask=filler_mask)
    return ids, mask, info


def eval_prompt(rng, tok, fc, total_len, depth, chat, ndigits=5):
    """A single pass-key question at `depth`; returns (prompt_ids, answer_ids, info).
    Greedy decoding of the prompt must reproduce answer_ids exactly."""
    ids, mask, info = retrieval_example(rng, tok, fc, total_len, chat=chat, n_facts=1,
                                        n_questions=1, depths=[depth], kinds=["passkey"],
                                        ndigits=ndigits)
    first = mask.index(1)
    last = len(mask) - 1 - mask[::-1].index(1)
    return ids[:first], ids[first:last + 1], info
