// Private to src/io: a whole-file checksum inside a zip archive's comment.
//
// torch's zip reader checks no CRC, and its unpickler trusts the lengths it reads: one flipped
// byte can load changed tensor values silently, or make it allocate gigabytes for a string
// before it notices the archive ended. So checkpoint archives carry, as the zip comment (the
// last bytes of the file, which every zip reader, torch.load included, skips), the FNV-1a hash
// of everything before it, checked before torch parses anything:
//
//   [zip archive ... end-of-central-directory record, comment length = 31]
//   "frugal-fnv1a64:" + 16 hex digits
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace frugal::io::detail {

// Appends the comment to an archive torch wrote (which ends in a comment-less end record).
void seal_archive(std::string& archive);

// The same in two parts, for an archive written as a stream (tensor_file.h): the size of the
// end record to hold back; that record (torch's, comment-less) made ready for the comment; and
// the comment, given the hash of everything before it (the record included).
inline constexpr size_t kSealEndRecordSize = 22;
void seal_end_record(std::string& end_record);
std::string seal_comment(std::uint64_t hash_before);

// True when `bytes` carry a seal and it matches; false when there is no seal (a plain torch
// archive). A seal that doesn't match throws the corrupt-data frugal::Error naming `what`.
bool check_archive_seal(std::string_view bytes, const std::string& what);

}  // namespace frugal::io::detail
