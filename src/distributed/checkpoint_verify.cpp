#include "frugal/distributed/checkpoint_verify.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <string>

#include "frugal/distributed/communicator.h"
#include "frugal/io/checkpoint.h"
#include "frugal/util/error.h"

namespace frugal::dist {

int64_t verify_checkpoint_together(Communicator& comm, const std::filesystem::path& dir) {
  std::string error;
  int64_t read = 0;
  // Any failure becomes the verdict: a rank that threw past the collectives below would leave
  // the others waiting for it.
  try {
    read = verify_checkpoint_part(dir, comm.rank(), comm.size());
  } catch (const std::exception& e) {
    error = e.what();
    if (error.empty()) error = "checkpoint '" + dir.string() + "': verification failed";
  }
  if (all_reduce_scalar(comm, error.empty() ? 0.0 : 1.0) == 0.0) return read;
  // The errors, one row per rank (character codes, zero-padded), summed into every rank.
  constexpr int64_t kChars = 1024;
  at::Tensor rows = at::zeros({comm.size(), kChars}, at::kInt);
  auto row = rows.accessor<int32_t, 2>()[comm.rank()];
  const auto n = std::min<int64_t>(kChars, static_cast<int64_t>(error.size()));
  for (int64_t i = 0; i < n; ++i) row[i] = static_cast<unsigned char>(error[static_cast<size_t>(i)]);
  at::Tensor shared = rows.to(comm.device());
  comm.all_reduce(shared);
  rows = shared.cpu();
  const auto all = rows.accessor<int32_t, 2>();
  for (int r = 0; r < comm.size(); ++r) {
    std::string text;
    for (int64_t i = 0; i < kChars && all[r][i] != 0; ++i) text.push_back(static_cast<char>(all[r][i]));
    if (!text.empty()) throw Error(text);
  }
  throw Error("checkpoint '" + dir.string() + "': a rank found it bad");  // not reached
}

}  // namespace frugal::dist
