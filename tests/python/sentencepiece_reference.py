"""SentencePiece models trained locally with the `sentencepiece` package, and the ids and text
it gives, for frugal's SentencePiece tokenizer to reproduce.

Usage: sentencepiece_reference.py OUT_DIR FORTUNES_DIR
Writes OUT_DIR/corpus.txt (tokenizer_reference.py's corpus: >= 1.1 MB, many scripts,
decomposed accents) and, for each style, OUT_DIR/<style>/tokenizer.model, OUT_DIR/<style>/ids.bin
(int32 little-endian: each document's ids, without BOS / EOS, then the EOS id, as prepare-text
writes them) and OUT_DIR/<style>/decoded.json (each document decoded from its ids). Styles:
  bpe      Llama 2's settings: BPE, byte fallback, digits split, no normalization, whitespace
           kept as it is
  unigram  the defaults, as T5's: unigram, nmt_nfkc normalization, extra whitespace removed,
           unknown characters to <unk>
  no_eos   a small BPE model without an EOS piece (for prepare-text's error)
Prints one JSON line with the sizes and timings.
"""
import array
import io
import json
import os
import sys
import time

import sentencepiece as spm

from tokenizer_reference import corpus

STYLES = {
    "bpe": dict(model_type="bpe", vocab_size=3000, byte_fallback=True, split_digits=True,
                normalization_rule_name="identity", remove_extra_whitespaces=False),
    # A sample of the lines: unigram's training on all of them takes several seconds.
    "unigram": dict(model_type="unigram", vocab_size=3000, input_sentence_size=8000,
                    shuffle_input_sentence=True, seed_sentencepiece_size=50000),
    "no_eos": dict(model_type="bpe", vocab_size=500, eos_id=-1, input_sentence_size=2000,
                   shuffle_input_sentence=True),
}


def train(lines, options):
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(lines), model_writer=model,
                                   num_threads=2, minloglevel=2, **options)
    return model.getvalue()


def main(out, fortunes):
    text = corpus(fortunes)
    open(f"{out}/corpus.txt", "w", encoding="utf-8", newline="").write(text)
    docs = text.split("\n\n")
    lines = [line for line in text.split("\n") if line.strip()]
    sizes = {"corpus_bytes": len(text.encode("utf-8")), "documents": len(docs)}
    for style, options in STYLES.items():
        start = time.time()
        model = train(lines, options)
        os.makedirs(f"{out}/{style}", exist_ok=True)
        open(f"{out}/{style}/tokenizer.model", "wb").write(model)
        sizes[f"{style}_train_s"] = round(time.time() - start, 2)
        if style == "no_eos":
            continue
        processor = spm.SentencePieceProcessor(model_proto=model)
        per_doc = processor.encode(docs)  # no BOS / EOS: the defaults
        ids = []
        for doc_ids in per_doc:
            ids.extend(doc_ids)
            ids.append(processor.eos_id())
        with open(f"{out}/{style}/ids.bin", "wb") as f:
            array.array("i", ids).tofile(f)
        with open(f"{out}/{style}/decoded.json", "w", encoding="utf-8") as f:
            json.dump(processor.decode(per_doc), f, ensure_ascii=False)
        sizes[style] = len(ids)
        sizes[f"{style}_byte_pieces"] = sum(1 for i in ids if processor.is_byte(i))
        sizes[f"{style}_unknown"] = sum(1 for i in ids if processor.is_unknown(i))
    print(json.dumps(sizes))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
