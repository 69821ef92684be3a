// The safetensors reader (Hugging Face weights, `frugal export --format hf`'s output): the
// header length, the JSON header, dtypes, shapes and offsets, read whole and memory-mapped.
#include "frugal/io/safetensors.h"
#include "fuzz_input.h"

FRUGAL_FUZZ_ENTRY(safetensors) {
  return frugal::fuzz::expect_frugal_errors_only([&] {
    const std::string path =
        frugal::fuzz::write_scratch_file("model.safetensors", frugal::fuzz::as_text(data, size));
    frugal::io::read_safetensors_metadata(path);
    frugal::io::read_safetensors(path);
    // The mapped tensors are views of the file's pages: read each one, as a load would.
    for (const auto& [name, tensor] : frugal::io::map_safetensors(path)) {
      (void)tensor.clone();
    }
  });
}
