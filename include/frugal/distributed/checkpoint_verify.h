// A checkpoint verified by the ranks of a job together, before a resume: each rank checks its
// share (io/checkpoint.h, verify_checkpoint_part: every file's size, and its slice of the
// blocks' hashes) and all learn one verdict, the lowest failing rank's error, so that every
// rank takes the same checkpoint or rejects it for the same reason. Each rank reads about
// 1/world of the checkpoint's bytes, where verifying alone reads them all (and then every rank
// would read every shard). Collective: every rank calls it, with the same directory.
#pragma once

#include <cstdint>
#include <filesystem>

namespace frugal::dist {

class Communicator;

// Returns the bytes this rank read; a frugal::Error (the same on every rank) when any rank
// found a bad file.
int64_t verify_checkpoint_together(Communicator& comm, const std::filesystem::path& dir);

}  // namespace frugal::dist
