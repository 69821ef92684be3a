#include "archive_seal.h"

#include <stdexcept>

#include "frugal/io/hash.h"
#include "torch_archive.h"

namespace frugal::io::detail {
namespace {

constexpr std::string_view kPrefix = "frugal-fnv1a64:";
constexpr size_t kCommentSize = kPrefix.size() + 16;
// The zip end-of-central-directory record: signature, ..., 2-byte comment length, comment.
constexpr std::string_view kEndSignature = "PK\x05\x06";
constexpr size_t kEndRecordSize = kSealEndRecordSize;
static_assert(kCommentSize < 256, "the comment length is written as one byte");
constexpr char kLengthField[2] = {static_cast<char>(kCommentSize), 0};  // little-endian uint16

}  // namespace

void seal_end_record(std::string& end_record) {
  if (end_record.size() != kEndRecordSize || end_record.compare(0, 4, kEndSignature) != 0 ||
      end_record.compare(kEndRecordSize - 2, 2, std::string(2, '\0')) != 0) {
    // torch's writer changed what it writes; an internal error, not a user's.
    throw std::logic_error("torch archive does not end in a comment-less zip end record");
  }
  end_record.replace(kEndRecordSize - 2, 2, kLengthField, 2);
}

std::string seal_comment(std::uint64_t hash_before) {
  return std::string(kPrefix) + hex64(hash_before);
}

void seal_archive(std::string& archive) {
  if (archive.size() < kEndRecordSize) {
    throw std::logic_error("torch archive does not end in a comment-less zip end record");
  }
  std::string end = archive.substr(archive.size() - kEndRecordSize);
  seal_end_record(end);
  archive.replace(archive.size() - kEndRecordSize, kEndRecordSize, end);
  archive.append(seal_comment(fnv1a64(archive)));
}

bool check_archive_seal(std::string_view bytes, const std::string& what) {
  if (bytes.size() < kEndRecordSize + kCommentSize) return false;
  size_t comment = bytes.size() - kCommentSize;
  std::string_view end = bytes.substr(comment - kEndRecordSize, kEndRecordSize);
  bool sealed = end.substr(0, 4) == kEndSignature &&
                end.substr(kEndRecordSize - 2) == std::string_view(kLengthField, 2) &&
                bytes.substr(comment, kPrefix.size()) == kPrefix;
  if (!sealed) return false;
  if (hex64(fnv1a64(bytes.substr(0, comment))) != bytes.substr(comment + kPrefix.size())) {
    throw_corrupt(what, "checksum mismatch");
  }
  return true;
}

}  // namespace frugal::io::detail
