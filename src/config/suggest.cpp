// "Did you mean" for unknown keys and values: the closest candidate by edit distance, offered
// only when it is close enough to be a plausible typo.
#include <algorithm>
#include <cctype>
#include <numeric>

#include "internal.h"

namespace frugal::config_detail {

// Levenshtein distance (insert, delete, substitute), case-insensitive, one row of memory.
size_t edit_distance(std::string_view a, std::string_view b) {
  auto lower = [](char c) { return std::tolower(static_cast<unsigned char>(c)); };
  std::vector<size_t> row(b.size() + 1);
  std::iota(row.begin(), row.end(), size_t{0});
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];  // row[i-1][j-1]
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      const size_t substitute = diagonal + (lower(a[i - 1]) == lower(b[j - 1]) ? 0 : 1);
      row[j] = std::min({above + 1, row[j - 1] + 1, substitute});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates) {
  // A third of the word may be wrong (at least one edit), so "lrr" finds "lr" but "x" finds
  // nothing; a clipped name ("warmup" for "warmup_steps") counts as close too.
  const size_t allowed = std::max<size_t>(1, word.size() / 3);
  const std::string* best = nullptr;
  size_t best_distance = allowed + 1;
  for (const std::string& candidate : candidates) {
    const bool clipped = word.size() >= 3 && candidate.starts_with(word);
    const size_t d = clipped ? allowed : edit_distance(word, candidate);
    if (d < best_distance) best = &candidate, best_distance = d;
  }
  return best ? " (did you mean '" + *best + "'?)" : "";
}

}  // namespace frugal::config_detail
