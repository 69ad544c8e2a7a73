#!/usr/bin/env python3
"""Writes a small synthetic dataset in ShareGPT's format (a JSON array of
{"id", "conversations": [{"from": "human"|"gpt", "value"}...]}) for the tests
of `kvserve bench --dataset`: no downloads, deterministic from --seed.

Prompt and reply lengths spread over two orders of magnitude (a few words to
a few hundred), as in real chat logs, and a few conversations have more than
one exchange; one entry has no human turn (a reader must skip it).

  /usr/bin/python3 tools/make_sharegpt.py --out tests/cli/data/sharegpt_small.json
"""
import argparse
import json
import random

SUBJECTS = ["the old bridge", "a small bakery", "the river town", "the night train", "a mountain village",
            "the science fair", "a rainy harbour", "the city library", "a garden on the roof", "the winter market"]
VERBS = ["describe", "explain", "summarise", "compare", "plan", "write about", "list facts about"]
PHRASES = ["people walk past slowly", "the light changes in the evening", "a bell rings at noon",
           "the shops open early", "visitors ask for directions", "children play near the water",
           "the wind comes from the west", "old stories are told again", "the roads are quiet at night",
           "a new road was built last year", "the bread smells warm", "the clock has stopped"]


def sentences(rng, n):
    out = []
    for _ in range(n):
        s = f"In {rng.choice(SUBJECTS)}, {rng.choice(PHRASES)} and {rng.choice(PHRASES)}."
        out.append(s[0].upper() + s[1:])
    return " ".join(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--n", type=int, default=40)
    ap.add_argument("--seed", type=int, default=7)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    data = []
    for i in range(a.n):
        turns = []
        for _ in range(1 if rng.random() < 0.8 else 2):
            context = sentences(rng, int(rng.lognormvariate(1.2, 1.0)) + 1)
            ask = f"Please {rng.choice(VERBS)} {rng.choice(SUBJECTS)}."
            turns.append({"from": "human", "value": f"{context} {ask}"})
            turns.append({"from": "gpt", "value": sentences(rng, int(rng.lognormvariate(1.0, 0.8)) + 1)})
        data.append({"id": f"synthetic-{i}", "conversations": turns})
    data.append({"id": "no-human-turn", "conversations": [{"from": "gpt", "value": "Hello."}]})
    with open(a.out, "w") as f:
        json.dump(data, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
