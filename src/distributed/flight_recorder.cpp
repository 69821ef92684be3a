#include "frugal/distributed/flight_recorder.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <tuple>

namespace frugal::dist {
namespace {

using nlohmann::json;

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

json record_json(const CollectiveRecord& r) {
  return {{"seq", r.seq},         {"op", r.op},       {"dtype", r.dtype}, {"numel", r.numel},
          {"tag", r.tag},         {"start_s", r.start_s}, {"end_s", r.end_s}, {"state", r.state}};
}

CollectiveRecord record_from(const json& j) {
  CollectiveRecord r;
  r.seq = j.value("seq", int64_t{0});
  r.op = j.value("op", std::string());
  r.dtype = j.value("dtype", std::string());
  r.numel = j.value("numel", int64_t{0});
  r.tag = j.value("tag", std::string());
  r.state = j.value("state", std::string());
  return r;
}

struct Dump {
  int64_t next_seq = 0;
  std::map<int64_t, CollectiveRecord> by_seq;
};

std::optional<Dump> read_dump(const std::filesystem::path& file) {
  std::ifstream in(file);
  if (!in) return std::nullopt;
  try {
    const json j = json::parse(in);
    Dump d;
    d.next_seq = j.value("next_seq", int64_t{0});
    for (const json& r : j.at("records")) {
      CollectiveRecord rec = record_from(r);
      d.by_seq[rec.seq] = std::move(rec);
    }
    return d;
  } catch (const std::exception&) {
    return std::nullopt;  // a dump being written or cut short: as if absent
  }
}

}  // namespace

FlightRecorder::FlightRecorder(size_t capacity) : capacity_(capacity), origin_s_(now_s()) {}

int64_t FlightRecorder::begin(std::string_view op, std::string_view dtype, int64_t numel,
                              std::string_view tag) {
  std::lock_guard<std::mutex> lock(mutex_);
  CollectiveRecord r;
  r.seq = next_seq_++;
  r.op = op;
  r.dtype = dtype;
  r.numel = numel;
  r.tag = tag;
  r.start_s = now_s() - origin_s_;
  records_.push_back(std::move(r));
  if (records_.size() > capacity_) records_.pop_front();
  return records_.back().seq;
}

void FlightRecorder::finish(int64_t seq, bool ok) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (records_.empty() || seq < records_.front().seq) return;  // already out of the ring
  CollectiveRecord& r = records_[static_cast<size_t>(seq - records_.front().seq)];
  r.end_s = now_s() - origin_s_;
  r.state = ok ? "done" : "failed";
}

int64_t FlightRecorder::next_seq() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return next_seq_;
}

std::vector<CollectiveRecord> FlightRecorder::records() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return {records_.begin(), records_.end()};
}

std::string FlightRecorder::to_json(int rank, int world, const std::string& why) const {
  json records = json::array();
  for (const auto& r : this->records()) records.push_back(record_json(r));
  return json{{"rank", rank},
              {"world_size", world},
              {"why", why},
              {"next_seq", next_seq()},
              {"records", std::move(records)}}
      .dump(1);
}

std::string describe(const CollectiveRecord& r) {
  std::string text = fmt::format("#{} {}", r.seq, r.op);
  if (!r.dtype.empty()) text += fmt::format(" {} x{}", r.dtype, r.numel);
  if (!r.tag.empty()) text += fmt::format(" [{}]", r.tag);
  return text;
}

std::string flight_recorder_verdict(const std::filesystem::path& dir, int world,
                                    double waited_s) {
  std::map<int, Dump> dumps;
  std::vector<int> missing;
  for (int r = 0; r < world; ++r) {
    auto d = read_dump(dir / fmt::format("rank_{}.json", r));
    if (d) {
      dumps[r] = std::move(*d);
    } else {
      missing.push_back(r);
    }
  }
  if (dumps.empty()) return "";
  std::vector<std::string> parts;
  // Behind: the fewest collectives completed.
  auto completed = [](const Dump& d) {
    int64_t n = 0;
    for (const auto& [seq, r] : d.by_seq) {
      if (r.state == "done") n = std::max(n, seq + 1);
    }
    return n;
  };
  int behind = -1;
  int64_t fewest = 0;
  bool all_equal = true;
  for (const auto& [rank, d] : dumps) {
    const int64_t n = completed(d);
    if (behind >= 0 && n != fewest) all_equal = false;
    if (behind < 0 || n < fewest) {
      behind = rank;
      fewest = n;
    }
  }
  if (dumps.size() > 1 && !all_equal) {
    const Dump& d = dumps.at(behind);
    const auto last = d.by_seq.find(fewest - 1);
    parts.push_back(fmt::format("rank {} is behind ({} collectives completed{})", behind, fewest,
                                last != d.by_seq.end() ? ", the last " + describe(last->second)
                                                       : std::string()));
  }
  // Where the ranks part: the first sequence number with different collectives, or missing on
  // some rank while another issued it.
  int64_t from = INT64_MAX, to = 0;
  for (const auto& [rank, d] : dumps) {
    if (!d.by_seq.empty()) from = std::min(from, d.by_seq.begin()->first);
    to = std::max(to, d.next_seq);
  }
  auto signature = [](const CollectiveRecord& r) {
    return std::tie(r.op, r.dtype, r.numel, r.tag);
  };
  for (int64_t seq = from; seq < to && dumps.size() > 1; ++seq) {
    std::vector<std::string> sides;
    const CollectiveRecord* first = nullptr;
    bool differ = false;
    for (const auto& [rank, d] : dumps) {
      const auto it = d.by_seq.find(seq);
      if (it == d.by_seq.end()) {
        if (seq >= d.next_seq) {
          differ = true;
          sides.push_back(fmt::format("rank {} never issued it", rank));
        }
        continue;  // older than this rank's ring: no evidence either way
      }
      if (first != nullptr && signature(*first) != signature(it->second)) differ = true;
      if (first == nullptr) first = &it->second;
      sides.push_back(fmt::format("rank {} {} ({})", rank, describe(it->second), it->second.state));
    }
    if (differ) {
      std::string joined;
      for (const auto& s : sides) joined += (joined.empty() ? "" : ", ") + s;
      parts.push_back(fmt::format("the ranks part at #{}: {}", seq, joined));
      break;
    }
  }
  for (int r : missing) {
    parts.push_back(waited_s > 0.0 ? fmt::format("rank {} left no dump within {:g} s (it died, "
                                                 "or is stuck)",
                                                 r, waited_s)
                                   // Not waited for (this rank is dying on its own,
                                   // std::terminate): the peer may be healthy, and dump later.
                                   : fmt::format("rank {} left no dump yet (not waited for)", r));
  }
  if (parts.empty()) parts.push_back("every rank issued the same collectives");
  std::string text;
  for (const auto& p : parts) text += (text.empty() ? "" : "; ") + p;
  return fmt::format("flight recorder: {} (dumps in '{}')", text, dir.string());
}

}  // namespace frugal::dist
