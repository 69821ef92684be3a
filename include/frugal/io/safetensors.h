// The safetensors format (https://github.com/huggingface/safetensors): an 8-byte little-endian
// header length N, N bytes of JSON {name: {dtype, shape, data_offsets: [begin, end]},
// "__metadata__": {string: string}} padded with spaces to a multiple of 8, then the raw
// little-endian tensor bytes, offsets relative to the end of the header.
#pragma once

#include <ATen/core/Tensor.h>

#include <filesystem>
#include <map>
#include <string>

#include "frugal/io/named_tensors.h"
#include "frugal/io/pending_tensors.h"

namespace frugal::io {

// Writes the tensors (contiguous CPU copies) in the given order, atomically. Names must be
// unique and not "__metadata__"; dtypes must have a safetensors name (F64 F32 F16 BF16 I64 I32
// I16 I8 U64 U32 U16 U8 BOOL F8_E4M3 F8_E5M2 F8_E4M3FNUZ F8_E5M2FNUZ C64); frugal::Error
// otherwise.
void write_safetensors(const std::filesystem::path& path, const NamedTensors& named,
                       const std::map<std::string, std::string>& metadata = {});
// The same from tensors read when their turn comes: the header from their announced shapes
// and dtypes, then each value read, written and let go (a value that is not what was
// announced is a frugal::Error naming the file and the tensor).
void write_safetensors(const std::filesystem::path& path, const PendingTensors& tensors,
                       const std::map<std::string, std::string>& metadata = {});

// CPU tensors in file (data offset) order. A file that is not valid safetensors (header length
// beyond the file, bad JSON, unknown dtype, offsets out of range, overlapping or not matching
// the shape) throws frugal::Error naming the file.
NamedTensors read_safetensors(const std::filesystem::path& path);

// The same tensors, validated the same way, as read-only views of a memory map of the file:
// nothing is read until used, and then only the pages used (a rank copying its shard of each
// tensor reads its shard). The map lives as long as the last tensor. Never write to them (the
// pages are read-only: a write is a crash); copy first. A tensor whose offset does not suit
// its dtype's alignment is read into memory instead.
NamedTensors map_safetensors(const std::filesystem::path& path);
// For a tensor map_safetensors returned, or a view of one (contiguous): its pages leave this
// process's resident memory (the page cache keeps them; a later read maps them again), so that
// a rank copying its slice of each tensor holds those slices, not the file. Returns false, and
// does nothing, for any other tensor (one read into memory, a copy).
bool release_mapped_pages(const at::Tensor& t);

// The "__metadata__" entries (empty when there are none), with the same validation.
std::map<std::string, std::string> read_safetensors_metadata(const std::filesystem::path& path);

}  // namespace frugal::io
