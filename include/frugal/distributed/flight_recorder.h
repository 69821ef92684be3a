// A collective flight recorder: each rank's Communicator keeps its most recent collectives
// (sequence number, op, dtype, element count, the unit or bucket it serves, start and end
// times). When a collective fails or times out, every rank that sees it writes its record to
// <run dir>/flight_recorder/rank_N.json, and reads the others' to say which rank is behind and
// at which collective the ranks' sequences part (flight_recorder_verdict): the question a hang
// in a job of many ranks leaves, which a timeout alone does not answer.
#pragma once

#include <cstdint>
#include <deque>
#include <filesystem>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace frugal::dist {

struct CollectiveRecord {
  int64_t seq = 0;      // this rank's count of collectives before this one
  std::string op;       // all_reduce, broadcast, all_gather, reduce_scatter, barrier
  std::string dtype;    // of the tensor handed in ("" for a barrier)
  int64_t numel = 0;
  std::string tag;      // what it serves: "blocks.3/decay", "bucket 2", ... ("" when unnamed)
  double start_s = 0;   // seconds since the recorder began
  double end_s = -1;    // -1 while it has not finished
  std::string state = "pending";  // pending | done | failed
};

class FlightRecorder {
 public:
  explicit FlightRecorder(size_t capacity = 512);

  // Records a collective being issued; returns its sequence number.
  int64_t begin(std::string_view op, std::string_view dtype, int64_t numel, std::string_view tag);
  void finish(int64_t seq, bool ok);
  int64_t next_seq() const;
  std::vector<CollectiveRecord> records() const;
  // {"rank", "world_size", "why", "next_seq", "records": [...]}, as the dump file holds.
  std::string to_json(int rank, int world, const std::string& why) const;

 private:
  mutable std::mutex mutex_;
  size_t capacity_;
  std::deque<CollectiveRecord> records_;
  int64_t next_seq_ = 0;
  double origin_s_;
};

// Reads the dumps (rank_*.json) in `dir` and says, in one sentence, which rank completed the
// fewest collectives and the first sequence number at which the ranks' collectives differ
// (op, dtype, size or tag) or one rank has none; "" when there are no dumps to compare.
// A rank without a dump is named; when the caller gave the ranks `waited_s` seconds to write
// theirs, as having died or being stuck: no failure of its own made it write one.
std::string flight_recorder_verdict(const std::filesystem::path& dir, int world,
                                    double waited_s = 0.0);

// One collective, for messages: "#42 all_gather float x1024 [blocks.3/decay]".
std::string describe(const CollectiveRecord& r);

}  // namespace frugal::dist
