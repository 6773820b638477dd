// libFuzzer target: nmkit's weight records (the JSON in __metadata__["nmkit.NAME"], decoded by
// src/io/checkpoint_record.cc). A refused record is fine; a crash, hang, leak or sanitizer report is
// a bug, and so is an accepted record that does not survive encode -> decode unchanged, or a slide
// geometry whose derived sizes are not consistent (they are computed, never stored).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "nmkit/checkpoint.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto record = nmkit::decode_record("fuzz.safetensors", "w", text);
  if (!record.ok()) return 0;
  const std::string encoded = nmkit::encode_record(*record);
  auto again = nmkit::decode_record("fuzz.safetensors", "w", encoded);
  if (!again.ok() || nmkit::encode_record(*again) != encoded) __builtin_trap();
  if (record->slide) {
    const nmkit::SlideGeometry& g = *record->slide;
    if (g.K_pad() < g.K || g.K_prime() < g.K_prime_raw() || g.K_prime() % g.align != 0 ||
        record->shape[1] != g.K_prime()) {
      __builtin_trap();
    }
  }
  return 0;
}
