"""Byte-level BPE tokenizers trained locally with the `tokenizers` package, and the ids it
gives, for frugal's tokenizer to reproduce.

Usage: tokenizer_reference.py OUT_DIR FORTUNES_DIR
Writes OUT_DIR/corpus.txt (>= 1.1 MB: fortunes text plus non-ASCII lines in several scripts,
decomposed accents, digits, tabs, CRLF and runs of spaces) and, for each style, OUT_DIR/<style>/
tokenizer.json and OUT_DIR/<style>/ids.bin (int32 little-endian) of the corpus encoded without
added special tokens. The styles: gpt2, llama3, qwen2, digits (pre-tokenizers), nfc (Qwen2.5's:
qwen2's with the NFC normalizer), nfc's vocabulary under the other normalizers (nfd, nfkd,
and a Sequence of NFD then NFKC), and nfc_added: nfc with an added token matched after the
normalizer and one before it. Prints one JSON line with the sizes.
"""
import array
import json
import os
import random
import sys

import unicodedata

from tokenizers import (AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers,
                        trainers)

LLAMA3 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
          r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"
         r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

WORDS = ["Größe", "naïve", "café", "Ελληνικά", "русский", "日本語のテキスト", "中文字符", "한국어",
         "العربية", "עברית", "🙂", "🚀✨", "déjà-vu", "Straße", "ﬁ", "1234567", "3.14159",
         "x²", "€42", "I'm", "DON'T", "you'LL", "\t", "  ", "\r\n", "...", "—", "«quoted»",
         # Not in NFC: combining accents (one on a base that composes, two in non-canonical
         # order), Hangul jamo, the Angstrom sign (a singleton), a compatibility ligature.
         "cafe\u0301", "A\u030angstro\u0308m", "e\u0302\u0323", "\u1100\u1161\u11a8",
         "\u212b", "n\u0303o", "q\u0307\u0323", "poste\u0301"]


def corpus(fortunes):
    parts = []
    for name in sorted(os.listdir(fortunes)):
        path = os.path.join(fortunes, name)
        if name.endswith((".dat", ".u8")) or not os.path.isfile(path):
            continue
        parts.append(open(path, encoding="utf-8", errors="replace").read())
        if sum(len(p) for p in parts) > 900_000:
            break
    text = "".join(parts)
    rng = random.Random(5)
    lines = []
    while sum(len(l) for l in lines) < 300_000:
        lines.append(" ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 12))))
    text += "\n".join(lines) + "\n"
    while len(text.encode("utf-8")) < 1_100_000:  # a machine with few fortunes
        text += text[: 200_000]
    return text


TRAINED = ["gpt2", "llama3", "qwen2", "digits", "nfc"]
# nfc's trained tokenizer with another normalizer: every form, and a Sequence, without training
# again.
RENORMALIZED = {
    "nfd": lambda: normalizers.NFD(),
    "nfkd": lambda: normalizers.NFKD(),
    "nfkc_sequence": lambda: normalizers.Sequence([normalizers.NFD(), normalizers.NFKC()]),
}


def build(style):
    bpe = models.BPE(ignore_merges=(style == "llama3"))
    tok = Tokenizer(bpe)
    if style == "nfc":
        tok.normalizer = normalizers.NFC()
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=(style == "gpt2"))
    if style == "llama3":
        tok.pre_tokenizer = pre_tokenizers.Sequence(
            [pre_tokenizers.Split(Regex(LLAMA3), behavior="isolated"), byte_level])
    elif style in ("qwen2", "nfc"):
        tok.pre_tokenizer = pre_tokenizers.Sequence(
            [pre_tokenizers.Split(Regex(QWEN2), behavior="isolated"), byte_level])
    elif style == "digits":
        tok.pre_tokenizer = pre_tokenizers.Sequence(
            [pre_tokenizers.Digits(individual_digits=True),
             pre_tokenizers.ByteLevel(add_prefix_space=True, use_regex=True)])
    else:  # gpt2
        tok.pre_tokenizer = byte_level
    tok.decoder = decoders.ByteLevel()
    return tok


def save(tok, out, style, docs, sizes):
    os.makedirs(f"{out}/{style}", exist_ok=True)
    tok.save(f"{out}/{style}/tokenizer.json")
    # Documents joined by the end-of-text token, as prepare-text writes them.
    ids = []
    eot = tok.token_to_id("<|endoftext|>")
    for doc in docs:
        ids.extend(tok.encode(doc, add_special_tokens=False).ids)
        ids.append(eot)
    with open(f"{out}/{style}/ids.bin", "wb") as f:
        array.array("i", ids).tofile(f)
    sizes[style] = len(ids)


def main(out, fortunes):
    text = corpus(fortunes)
    open(f"{out}/corpus.txt", "w", encoding="utf-8", newline="").write(text)
    sizes = {"corpus_bytes": len(text.encode("utf-8")),
             "combining_marks": sum(1 for c in text if unicodedata.combining(c)),
             "corpus_is_nfc": unicodedata.is_normalized("NFC", text)}
    docs = text.split("\n\n")
    for style in TRAINED:
        tok = build(style)
        trainer = trainers.BpeTrainer(vocab_size=3000, special_tokens=["<|endoftext|>"],
                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                      show_progress=False)
        tok.train_from_iterator(docs, trainer=trainer)
        save(tok, out, style, docs, sizes)
        if style == "nfc":
            for name, normalizer in RENORMALIZED.items():
                tok.normalizer = normalizer()
                save(tok, out, name, docs, sizes)
            # Added tokens matched in the normalized text (café, either spelling), or in the raw
            # text only (sté spelled with U+0301, as the corpus has it).
            tok.normalizer = normalizers.NFC()
            tok.add_tokens([AddedToken("caf\u00e9", normalized=True),
                            AddedToken("ste\u0301", normalized=False)])
            save(tok, out, "nfc_added", docs, sizes)
    print(json.dumps(sizes))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
