// The config loader on YAML text: parsing, `extends:`, shorthands, binding to typed fields,
// validation. A config that loads must also dump (to_yaml) and load back: the dump is what a
// run writes as config.resolved.yaml and a resume reads.
#include "frugal/config/load.h"
#include "fuzz_input.h"

FRUGAL_FUZZ_ENTRY(config) {
  return frugal::fuzz::expect_frugal_errors_only([&] {
    const std::string text(frugal::fuzz::as_text(data, size));
    // Named inside the scratch folder, so that a relative `extends:` stays there.
    const std::string source = frugal::fuzz::scratch_dir() + "/config.yaml";
    const frugal::Config config = frugal::load_config_string(text, source);
    frugal::load_config_string(frugal::to_yaml(config), source);
  });
}
