// The token-shard reader: format detection, nanoGPT and llm.c (uint16 and uint32) headers and
// sizes, then a read across the stream, the vocabulary check and a training window.
#include <algorithm>
#include <vector>

#include "frugal/data/token_dataset.h"
#include "frugal/data/token_stream.h"
#include "fuzz_input.h"

FRUGAL_FUZZ_ENTRY(tokens) {
  return frugal::fuzz::expect_frugal_errors_only([&] {
    const std::string path =
        frugal::fuzz::write_scratch_file("shard.bin", frugal::fuzz::as_text(data, size));
    frugal::TokenStream stream =
        frugal::open_token_files(path, frugal::TokenFormat::detect, "data.path");
    const int64_t n = stream.size();
    std::vector<int64_t> tokens(static_cast<size_t>(std::min<int64_t>(n, 64)));
    stream.read(0, static_cast<int64_t>(tokens.size()), tokens.data());
    stream.check_vocab(50257, 0, n, "data.path");
    frugal::TokenDataset windows(std::move(stream), /*seq_len=*/4, /*eot_token=*/0);
    if (windows.size() > 0) windows.get({0, windows.size() - 1});
  });
}
