// `nmkit bench quant`: fused quantize+lift against plain per-token quantization of the same bf16
// activations (issue 3), with the machine's copy bandwidth measured in the same run.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "nmkit/cpu.h"
#include "nmkit/pattern.h"
#include "nmkit/quant.h"

namespace nmkit::bench {

struct QuantBenchOptions {
  std::vector<int64_t> Ms{1, 16, 256, 4096};
  // 4096: Llama hidden size; 11008: Llama-2-7B's MLP width (the down projection's K).
  std::vector<int64_t> Ks{4096, 11008};
  std::vector<QuantType> types{QuantType::Int8, QuantType::E4M3};
  std::vector<Pattern> patterns{{2, 4}, {4, 6}, {6, 8}, {8, 10}};
  int align = 32;
  double min_seconds = 0.3;  // per timed kernel, after warm-up
  std::string json_path;     // empty: no JSON
  bool stream = false;       // non-temporal stores of the codes (StreamStores::Always)
};

// Prints the table and the verdict on the targets; returns the process exit code (1 when a kernel's
// output disagrees with the scalar reference).
int run_quant_bench(const QuantBenchOptions& options);

}  // namespace nmkit::bench
