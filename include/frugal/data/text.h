// Plain text as byte-level tokens (vocab 256): the `text` data type and `frugal prepare-text`.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "frugal/data/token_stream.h"

namespace frugal {

// The text files under `path`: the file itself, or every regular file in the directory (not
// recursive), sorted by name, skipping hidden files, names ending in .dat or .u8 and files
// containing NUL bytes (binary). A single file given explicitly must not contain NUL bytes.
// Errors name `key`.
std::vector<std::string> list_text_files(const std::string& path, const std::string& key);

// The bytes of the files list_text_files(path) finds, concatenated, one token per byte.
TokenStream open_text_files(const std::string& path, const std::string& key);

// Writes the bytes of `inputs` (files or directories, as list_text_files) as uint16 tokens in
// `format` (nanogpt, or llmc; detect means llmc, whose header records the token count).
// Writes to a temporary file and renames it, so `output` is never left half-written; refuses
// to replace an existing `output` unless `overwrite`. Returns the number of tokens written.
int64_t prepare_text(const std::vector<std::string>& inputs, const std::string& output,
                     TokenFormat format, bool overwrite = false);

// The same with a tokenizer (data/tokenizer.h; a tokenizer.json, a SentencePiece .model, or a
// folder holding one): each file is a document, encoded and followed by the end-of-text token
// (tokenizer_config.json's eos_token, else the SentencePiece model's eos piece, else
// <|endoftext|>, <|end_of_text|> or </s>; a tokenizer with none is an error). Tokens are uint16
// when the vocabulary has at most 65536, else uint32 in llm.c's Llama 3 shards (magic
// 20240801, version 7; nanogpt cannot hold them and is refused).
int64_t prepare_text_tokenized(const std::vector<std::string>& inputs, const std::string& output,
                               TokenFormat format, const std::filesystem::path& tokenizer,
                               bool overwrite = false);

}  // namespace frugal
