"""Makes a small synthetic chat dataset in JSONL, to try instruction tuning (SFT) on a machine
without downloads: a tiny model (tools/make_tiny_llama.py --chat) learns its tasks in a few
hundred steps on a CPU, so that chatting with it visibly works afterwards.

One conversation per line, mostly {"messages": [{"role": "user", "content": ...},
{"role": "assistant", "content": ...}]}. The tasks, on short phrases (lowercase ASCII letters
and spaces, 1-6 words) taken from the lines of a text corpus, or put together from its words:
  "Repeat: <phrase>"               -> the phrase
  "Reverse the words: a b c"       -> "c b a"
  "Uppercase: <phrase>"            -> the phrase in capitals
  "What is 12 plus 7?"             -> "19" (numbers up to 20)
About 10% of the conversations start with a system message and about 10% have two
user/assistant rounds (multi-turn masking: only the assistant turns are trained); a few lines
use the two other shapes frugal reads, {"prompt": ..., "completion": ...} and alpaca's
{"instruction": ..., "input": ..., "output": ...}. Deterministic from --seed. Without the
corpus (a missing path) the phrases come from a built-in word list. Standard library only.

Usage: python3 tools/make_chat_data.py OUT.jsonl [--n 2000] [--seed 1]
                                       [--corpus FILE_OR_DIR (/usr/share/games/fortunes)]
"""
import argparse
import json
import os
import random
import re
import sys

PHRASE = re.compile(r"[a-z]+(?: [a-z]+){0,5}")
MAX_PHRASE_CHARS = 40
MAX_NUMBER = 20

WORDS = """the a cat dog sun moon tree river stone house light dark red blue green small big old
new fast slow happy quiet cold warm bird fish apple bread water fire wind rain snow road book
door window garden city night day morning star cloud sea ship hill field flower king queen
little bright open close run walk sing read write jump sleep eat drink see find give take
make know think come go play look hear love keep call ask tell good bad long short high low
""".split()

SYSTEMS = ["You are a helpful assistant.",
           "You are a helpful assistant. Answer briefly.",
           "You are a careful assistant that follows instructions exactly."]


def read_phrases(path):
    """The corpus's short lines that are phrases (lowercased, deduplicated, in reading order)."""
    files = [path] if os.path.isfile(path) else sorted(
        os.path.join(path, f) for f in os.listdir(path)
        if not f.endswith((".dat", ".u8")) and os.path.isfile(os.path.join(path, f)))
    phrases = {}
    for f in files:
        for line in open(f, encoding="utf-8", errors="replace"):
            line = " ".join(line.split()).lower()
            if len(line) <= MAX_PHRASE_CHARS and PHRASE.fullmatch(line):
                phrases[line] = None
    return list(phrases)


class Tasks:
    def __init__(self, rng, phrases):
        self.rng = rng
        self.phrases = phrases
        self.words = sorted({w for p in phrases for w in p.split()})

    def phrase(self, min_words=1):
        """A corpus line half the time, else 1-4 of its words."""
        while True:
            if self.rng.random() < 0.5:
                p = self.rng.choice(self.phrases)
            else:
                p = " ".join(self.rng.choice(self.words) for _ in range(self.rng.randint(1, 4)))
            if len(p.split()) >= min_words and len(p) <= MAX_PHRASE_CHARS:
                return p

    def one(self):
        """(instruction, input, prompt, answer): prompt = the user's message."""
        kind = self.rng.randrange(4)
        if kind == 0:
            p = self.phrase()
            return "Repeat:", p, f"Repeat: {p}", p
        if kind == 1:
            p = self.phrase(min_words=2)
            return "Reverse the words:", p, f"Reverse the words: {p}", " ".join(reversed(p.split()))
        if kind == 2:
            p = self.phrase()
            return "Uppercase:", p, f"Uppercase: {p}", p.upper()
        a, b = self.rng.randint(0, MAX_NUMBER), self.rng.randint(0, MAX_NUMBER)
        q = f"What is {a} plus {b}?"
        return q, "", q, str(a + b)


def row(tasks, rng):
    r = rng.random()
    instruction, inp, prompt, answer = tasks.one()
    if r < 0.02:
        return {"prompt": prompt, "completion": answer}
    if r < 0.04:
        # frugal (and alpaca) show the user instruction + "\n\n" + input.
        if instruction.endswith(":"):
            instruction = instruction[:-1] + "."
        return {"instruction": instruction, "input": inp, "output": answer}
    messages = []
    if rng.random() < 0.1:
        messages.append({"role": "system", "content": rng.choice(SYSTEMS)})
    messages += [{"role": "user", "content": prompt}, {"role": "assistant", "content": answer}]
    if rng.random() < 0.1:
        _, _, prompt, answer = tasks.one()
        messages += [{"role": "user", "content": prompt}, {"role": "assistant", "content": answer}]
    return {"messages": messages}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("--n", type=int, default=2000, help="conversations (lines) to write")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--corpus", default="/usr/share/games/fortunes")
    a = ap.parse_args()
    if a.n < 1:
        ap.error("--n must be at least 1")
    if os.path.exists(a.out):
        print(f"make_chat_data: '{a.out}' already exists; remove it first", file=sys.stderr)
        return 2
    phrases = read_phrases(a.corpus) if os.path.exists(a.corpus) else []
    source = f"{len(phrases)} phrases from {a.corpus}"
    if len(phrases) < 20:
        phrases, source = sorted(set(WORDS)), "the built-in word list"
    rng = random.Random(a.seed)
    tasks = Tasks(rng, phrases)
    lines = [json.dumps(row(tasks, rng)) + "\n" for _ in range(a.n)]
    os.makedirs(os.path.dirname(a.out) or ".", exist_ok=True)
    with open(a.out, "x", encoding="utf-8") as f:
        f.writelines(lines)
    print(f"wrote {a.out}: {a.n} conversations ({source})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
