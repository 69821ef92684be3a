"""Writes the seed corpora of the fuzz targets (fuzz/corpus/<target>/): small valid inputs and
a few broken ones per reader, so that fuzzing starts from the formats' real shapes. Run once
with the venv's python (torch, safetensors); the output is committed. The checkpoint target's
valid seeds (valid-*) come from the target itself, which writes its fixture's files when
FRUGAL_FUZZ_SEEDS names a folder (the reshard target's too); inputs that once found a problem
are added by hand as regression-<what>. The tokenizer_json seeds include the bad-input corpus's
tokenizer files (tests/bad_inputs/corpus/data-tokenizer-*).

    .venv/bin/python fuzz/make_seeds.py
    FRUGAL_FUZZ_SEEDS=fuzz/corpus/checkpoint build-fuzz/bin/frugal_fuzz_checkpoint \
        fuzz/corpus/checkpoint/broken-meta.json
    FRUGAL_FUZZ_SEEDS=fuzz/corpus/reshard build-fuzz/bin/frugal_fuzz_reshard \
        fuzz/corpus/reshard/broken-index.json
"""
import io
import json
import pathlib
import shutil
import struct

import numpy as np
import torch
from safetensors.numpy import save as save_safetensors

root = pathlib.Path(__file__).resolve().parent.parent
corpus = root / "fuzz" / "corpus"


def write(target, name, data):
    folder = corpus / target
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_bytes(data if isinstance(data, bytes) else data.encode())


def config_seeds():
    for path in sorted((root / "configs").glob("*.yaml")):
        write("config", path.name, path.read_bytes())
    write("config", "tiny-llama.yaml",
          "model: {type: llama, n_layer: 1, n_head: 2, n_embd: 8, intermediate_size: 16, "
          "block_size: 8, vocab_size: 32}\n"
          "data: {type: synthetic, micro_batch_size: 2, synthetic_samples: 16}\n"
          "strategy: {sharding: zero3, precision: bf16-mixed, grad_scaler: {init_scale: 1024}}\n")
    write("config", "aliases.yaml", "a: &a [1, 2]\nmodel: {n_layer: 2}\noptim: {betas: *a}\n")
    write("config", "extends-missing.yaml", "extends: parent.yaml\nmodel: {n_layer: 2}\n")
    write("config", "bad-tab.yaml", "model:\n\tn_layer: 2\n")


def header_only(tensors_header):
    text = json.dumps(tensors_header).encode()
    return struct.pack("<Q", len(text)) + text


def safetensors_seeds():
    write("safetensors", "valid-f32-i64.safetensors", save_safetensors(
        {"w": np.arange(6, dtype=np.float32).reshape(2, 3), "n": np.array([7], dtype=np.int64)},
        metadata={"format": "pt"}))
    write("safetensors", "valid-u8-empty.safetensors", save_safetensors(
        {"e": np.zeros((0, 4), dtype=np.float16), "b": np.array([1, 0, 1], dtype=np.uint8)}))
    bf16 = torch.arange(4, dtype=torch.bfloat16)
    write("safetensors", "valid-bf16.safetensors",
          header_only({"x": {"dtype": "BF16", "shape": [4], "data_offsets": [0, 8]}}) +
          bf16.view(torch.int16).numpy().tobytes())
    write("safetensors", "broken-header-length.safetensors", struct.pack("<Q", 2**63) + b"{}")
    write("safetensors", "broken-offsets.safetensors",
          header_only({"x": {"dtype": "F32", "shape": [2], "data_offsets": [0, 99]}}) + bytes(8))
    write("safetensors", "broken-overlap.safetensors",
          header_only({"x": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
                       "y": {"dtype": "F32", "shape": [1], "data_offsets": [2, 6]}}) + bytes(8))


def checkpoint_seeds():
    # A plain dict saved by Python's torch.save, as model.pt (selector byte 1): the reader's
    # other accepted form, which carries no seal.
    buffer = io.BytesIO()
    torch.save({"w": torch.arange(3.0), "b": torch.zeros(2, dtype=torch.int64)}, buffer)
    write("checkpoint", "torch-save-dict-model.pt", b"\x01" + buffer.getvalue())
    write("checkpoint", "broken-manifest.json", b"\x00" + b'{"files": {"model.pt": 3}}')
    write("checkpoint", "broken-meta.json", b"\x04" + b'{"step": ')


def tokens_seeds():
    write("tokens", "nanogpt.bin", np.array([1, 2, 3, 50256, 4, 5, 6, 7], dtype=np.uint16).tobytes())
    for magic, version, dtype, name in [(20240520, 1, np.uint16, "llmc-u16.bin"),
                                        (20240801, 7, np.uint32, "llmc-u32.bin")]:
        tokens = np.array([0, 11, 22, 33, 0, 44], dtype=dtype)
        header = np.zeros(256, dtype=np.int32)
        header[:3] = [magic, version, len(tokens)]
        write("tokens", name, header.tobytes() + tokens.tobytes())
    bad = root / "tests" / "bad_inputs" / "corpus"
    for case in ["data-llmc-bad-version", "data-llmc-truncated", "data-tokens-odd-length",
                 "data-tokens-out-of-vocab"]:
        write("tokens", case + ".bin", (bad / case / "shard.bin").read_bytes())


def idx_input(labels, images):
    assert len(labels) < 256
    return bytes([len(labels)]) + labels + images


def idx_seeds():
    n, h, w = 3, 2, 2
    images = struct.pack(">IIII", 0x803, n, h, w) + bytes(range(n * h * w))
    labels = struct.pack(">II", 0x801, n) + bytes([0, 9, 4])
    write("idx", "valid.idx", idx_input(labels, images))
    bad = root / "tests" / "bad_inputs" / "corpus"
    for case in ["data-idx-bad-magic", "data-idx-huge-dimensions", "data-idx-label-count",
                 "data-idx-dimensions-int64-max"]:
        write("idx", case + ".idx", idx_input((bad / case / "train-labels").read_bytes(),
                                              (bad / case / "train-images").read_bytes()))


def bad_input_files(prefix, name):
    """The bad-input corpus's cases of this prefix: (case, bytes of `name` in it)."""
    bad = root / "tests" / "bad_inputs" / "corpus"
    for case in sorted(bad.glob(prefix + "*")):
        for path in [case / name, case / "tok" / name]:
            if path.is_file():
                yield case.name, path.read_bytes()


def hf_config_seeds():
    write("hf_config", "valid-llama.json", json.dumps({
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 32,
        "hidden_size": 8, "intermediate_size": 16, "num_hidden_layers": 1,
        "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 4,
        "max_position_embeddings": 8, "rms_norm_eps": 1e-5, "tie_word_embeddings": True,
        "hidden_act": "silu", "rope_parameters": {"rope_theta": 10000.0, "rope_type": "default"}},
        indent=2))
    write("hf_config", "valid-llama3-scaling.json", json.dumps({
        "model_type": "llama", "vocab_size": 64, "hidden_size": 16, "intermediate_size": 32,
        "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
        "rope_theta": 500000.0, "rope_scaling": {"rope_type": "llama3", "factor": 8.0,
        "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}}))
    write("hf_config", "valid-qwen2.json", json.dumps({
        "model_type": "qwen2", "vocab_size": 32, "hidden_size": 8, "intermediate_size": 16,
        "num_hidden_layers": 1, "num_attention_heads": 2, "use_sliding_window": False}))
    write("hf_config", "broken-layers-float.json", '{"model_type": "llama", "vocab_size": 32, '
          '"hidden_size": 8, "intermediate_size": 16, "num_hidden_layers": 1.0, '
          '"num_attention_heads": 2}')
    write("hf_config", "broken-array.json", "[1, 2, 3]")


def tokenizer_json_seeds():
    base = {"version": "1.0", "added_tokens": [
                {"id": 5, "content": "<|endoftext|>", "single_word": False, "lstrip": False,
                 "rstrip": False, "normalized": False, "special": True}],
            "normalizer": {"type": "Sequence", "normalizers": [{"type": "NFC"}]},
            "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
                {"type": "Split", "pattern": {"Regex": "\\p{N}{1,3}"}, "behavior": "Isolated"},
                {"type": "Digits", "individual_digits": False},
                {"type": "ByteLevel", "add_prefix_space": False, "use_regex": False}]},
            "model": {"type": "BPE", "dropout": None, "unk_token": None, "ignore_merges": False,
                      "vocab": {"a": 0, "b": 1, "ab": 2, "c": 3, "abc": 4},
                      "merges": ["a b", ["ab", "c"]]}}
    write("tokenizer_json", "valid-small.json", json.dumps(base, indent=1))
    for case, data in bad_input_files("data-tokenizer-", "tokenizer.json"):
        write("tokenizer_json", case + ".json", data)


def sentencepiece_seeds():
    # A small BPE model trained here (identity normalization: no 200 KB character map), and
    # the same cut short and with a byte flipped.
    import sentencepiece as spm
    text = root / "tests" / "bad_inputs" / "corpus" / "README.md"
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(input=str(text), model_writer=model, vocab_size=150, hard_vocab_limit=False,
                                   model_type="bpe", normalization_rule_name="identity",
                                   minloglevel=2)
    data = model.getvalue()
    write("sentencepiece", "valid-bpe.model", data)
    write("sentencepiece", "broken-truncated.model", data[: len(data) // 2])
    write("sentencepiece", "broken-flipped.model", data[:9] + bytes([data[9] ^ 0xFF]) + data[10:])


def reshard_seeds():
    # Broken ones; the valid files come from the target itself (FRUGAL_FUZZ_SEEDS, above).
    layout = {"mode": "zero3", "world_size": 3, "flats": [
        {"name": "unit/group0", "numel": 7, "names": ["w", "b"], "shapes": [[2, 3], [1]],
         "offsets": [0, 6]}]}
    meta = {"step": 5, "data": {"epoch": 0, "position": 10}, "sharding": layout}
    write("reshard", "broken-layout-world.json", b"\x01" + json.dumps(meta).encode())
    layout["world_size"] = 2
    layout["flats"][0]["numel"] = 99
    write("reshard", "broken-layout-numel.json", b"\x01" + json.dumps(meta).encode())
    write("reshard", "broken-index.json", b"\x02" + b'{"tensors": {"unit/group0/param": 1}}')


def chat_seeds():
    def line(name, obj):
        write("chat", name, obj if isinstance(obj, str) else json.dumps(obj, ensure_ascii=False))
    line("valid-messages.json", {"messages": [
        {"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi \u00e9"},
        {"role": "assistant", "content": " Hello. "}, {"role": "user", "content": ""},
        {"role": "assistant", "content": "\u4f60\u597d"}]})
    line("valid-prompt-completion.json", {"prompt": "2+2?", "completion": "4", "id": 7})
    line("valid-trl-conversational.json", {
        "prompt": [{"role": "user", "content": "Name a colour."}],
        "completion": [{"role": "assistant", "content": "Blue."}]})
    line("valid-alpaca.json", {"instruction": "Reverse.", "input": "abc", "output": "cba"})
    line("broken-role.json", {"messages": [{"role": "tool", "content": "x"}]})
    line("broken-tool-calls.json", {"messages": [
        {"role": "assistant", "content": "", "tool_calls": [{"name": "f"}]}]})
    line("broken-two-shapes.json", {"prompt": "a", "completion": "b", "output": "c"})
    line("broken-content-number.json", {"messages": [{"role": "user", "content": 3}]})
    line("broken-not-json.json", '{"messages": [')


if __name__ == "__main__":
    for target in ["config", "safetensors", "tokens", "idx", "hf_config", "tokenizer_json",
                   "sentencepiece", "chat"]:
        shutil.rmtree(corpus / target, ignore_errors=True)
    config_seeds()
    safetensors_seeds()
    checkpoint_seeds()
    tokens_seeds()
    idx_seeds()
    hf_config_seeds()
    tokenizer_json_seeds()
    sentencepiece_seeds()
    reshard_seeds()
    chat_seeds()
