// Language-model samples over a TokenStream: non-overlapping windows of seq_len T.
// Sample i reads tokens [i*T, i*T + T + 1): x = the first T, y = the last T (x shifted by
// one, the next-token targets), so size() = (n_tokens - 1) / T. With an end-of-text token,
// also position ids: packed documents that do not see each other.
#pragma once

#include "frugal/data/dataset.h"
#include "frugal/data/token_stream.h"

namespace frugal {

class TokenDataset : public Dataset {
 public:
  // Throws std::invalid_argument when seq_len < 1 (make_dataset reports user errors first).
  // eot_token >= 0: samples carry position ids that restart after each such token (the end of
  // a document), 0 at the window's start (Batch::position_ids).
  TokenDataset(TokenStream stream, int64_t seq_len, int64_t eot_token = -1);

  int64_t size() const override { return size_; }
  Batch get(const std::vector<int64_t>& indices) const override;  // x, y: (B, T) int64

  const TokenStream& stream() const { return stream_; }
  int64_t seq_len() const { return seq_len_; }

 private:
  TokenStream stream_;
  int64_t seq_len_;
  int64_t eot_token_;
  int64_t size_;
};

}  // namespace frugal
