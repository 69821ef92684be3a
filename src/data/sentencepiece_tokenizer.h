// SentencePiece `.model` files behind frugal::Tokenizer. Only this header's .cpp sees the
// SentencePiece library, so it stays out of frugal's public headers.
#pragma once

#include <filesystem>
#include <memory>

#include "frugal/data/tokenizer.h"

namespace frugal::detail {

// A SentencePiece model file (a serialized ModelProto). A file the library refuses is a
// frugal::Error naming it.
std::shared_ptr<Tokenizer> load_sentencepiece(const std::filesystem::path& file);

}  // namespace frugal::detail
