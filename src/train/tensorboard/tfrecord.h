// TFRecord framing, the container of TensorBoard's event files: each record is
//   uint64 length | uint32 masked CRC-32C of those 8 bytes | data | uint32 masked CRC-32C of data
// all little-endian, the CRC-32C's masked as frugal::masked_crc32c does
// (frugal/train/tensorboard.h). Private to the library (the writer and its resume trim).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace frugal::tfrecord {

// One framed record.
std::string frame(std::string_view data);

// The records of a file's bytes, in order, up to the first one that is incomplete or fails a
// CRC (a record torn by a crash ends the file there).
std::vector<std::string> records(std::string_view bytes);

}  // namespace frugal::tfrecord
