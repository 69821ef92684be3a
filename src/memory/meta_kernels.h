// Meta kernels (output shapes and dtypes, no data) for the ATen operators frugal's models use
// whose meta kernels PyTorch has only in Python (torch/_meta_registrations.py), so that a
// step traced from C++ on the meta device (meta_trace.h) runs. Registered on first use, once.
#pragma once

namespace frugal::memory {

void register_meta_kernels();

}  // namespace frugal::memory
