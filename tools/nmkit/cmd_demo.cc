// nmkit demo [--model PATH] [--out DIR]: what `make run` shows. Prunes a real checkpoint to 2:4, 4:8
// and 6:8, prints the totals side by side, writes the compressed outputs and checks them back with the
// inspect logic (every pruned tensor complies; decompression gives the pruned weights bit for bit).
#include <cstring>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <variant>
#include <vector>
#include <fmt/core.h>

#include "nmkit/checkpoint.h"
#include "tools/nmkit/cli_util.h"
#include "tools/nmkit/command.h"
#include "nmkit/format.h"
#include "tools/nmkit/inspect_logic.h"
#include "nmkit/prune.h"
#include "tools/nmkit/prune_report.h"
#include "nmkit/safetensors.h"

namespace nmkit::cli {
namespace {

struct DemoArgs {
  std::string model;
  std::string out = "nmkit-demo";
};

// A stand-in used only when no real checkpoint is available: two decoder layers in the shapes of
// SmolLM-135M (hidden 576, intermediate 1536, 3 KV heads of 64), embeddings cut to 4096 tokens, random
// normal(0, 0.02) weights from a fixed seed.
Status write_generated_checkpoint(const std::string& path) {
  struct Spec {
    std::string name;
    Shape shape;
  };
  std::vector<Spec> specs{{"model.embed_tokens.weight", {4096, 576}}};
  for (int layer = 0; layer < 2; ++layer) {
    const std::string p = fmt::format("model.layers.{}.", layer);
    specs.push_back({p + "input_layernorm.weight", {576}});
    specs.push_back({p + "self_attn.q_proj.weight", {576, 576}});
    specs.push_back({p + "self_attn.k_proj.weight", {192, 576}});
    specs.push_back({p + "self_attn.v_proj.weight", {192, 576}});
    specs.push_back({p + "self_attn.o_proj.weight", {576, 576}});
    specs.push_back({p + "post_attention_layernorm.weight", {576}});
    specs.push_back({p + "mlp.gate_proj.weight", {1536, 576}});
    specs.push_back({p + "mlp.up_proj.weight", {1536, 576}});
    specs.push_back({p + "mlp.down_proj.weight", {576, 1536}});
  }
  specs.push_back({"model.norm.weight", {576}});
  std::vector<OutputTensor> outputs;
  uint32_t seed = 1234;
  for (const auto& spec : specs) {
    const bool is_norm = spec.shape.size() == 1;
    outputs.push_back(OutputTensor{spec.name, DType::F32, spec.shape, [spec, is_norm, seed](std::byte* dst) {
                                     std::mt19937 rng(seed);
                                     std::normal_distribution<float> normal(0.0f, 0.02f);
                                     const int64_t n = shape_numel(spec.shape);
                                     for (int64_t i = 0; i < n; ++i) {
                                       const float value = is_norm ? 1.0f : normal(rng);
                                       std::memcpy(dst + i * 4, &value, 4);
                                     }
                                     return ok_status();
                                   }});
    ++seed;
  }
  return write_safetensors(path, outputs, {{"nmkit.generated", "random normal(0, 0.02), seed 1234.."}});
}

struct PatternRun {
  Pattern pattern;
  WeightFormat format;
  std::string output;
  PruneOutcome outcome;
};

// Reads an output back: every pruned tensor complies with its pattern (inspect's check) and its
// decompression equals pruning the input in memory, bit for bit.
struct CheckResult {
  size_t pruned = 0;
  size_t complies = 0;
  size_t exact = 0;
  size_t unchanged = 0;  // tensors copied through, byte-identical to the input
  size_t copied = 0;
};

Result<CheckResult> check_output(const SafetensorsFile& input, const PatternRun& run) {
  CheckResult check;
  auto inspected = inspect_file(run.output);
  if (!inspected.ok()) return inspected.error();
  for (const auto& t : *inspected) {
    if (!t.record) continue;
    ++check.pruned;
    check.complies += t.complies.value_or(false);
  }
  auto file = SafetensorsFile::open(run.output);
  if (!file.ok()) return file.error();
  auto stored = list_stored(*file);
  if (!stored.ok()) return stored.error();
  for (const StoredTensor& st : *stored) {
    const TensorInfo* original = input.find(st.name);
    if (original == nullptr) return Error(fmt::format("{}: tensor {} is not in the input", run.output, quote_name(st.name)));
    const TensorView source = input.view(*original);
    if (!st.record) {
      ++check.copied;
      const TensorView copy = file->view(*st.parts.at(0));
      check.unchanged += copy.nbytes() == source.nbytes() && std::memcmp(copy.data, source.data, copy.nbytes()) == 0;
      continue;
    }
    auto expected = prune(source, run.pattern, PruneMethod::Magnitude, {}, st.name);
    if (!expected.ok()) return expected.error();
    auto loaded = load_weight(*file, st);
    if (!loaded.ok()) return loaded.error();
    Tensor dense;
    if (auto* s24 = std::get_if<Sparse24>(&*loaded)) dense = decompress(*s24);
    if (auto* nm = std::get_if<NMPacked>(&*loaded)) dense = decompress(*nm);
    const Tensor& want = expected->pruned;
    check.exact += dense.nbytes() == want.nbytes() && dense.shape() == want.shape() &&
                   std::memcmp(dense.data(), want.data(), want.nbytes()) == 0;
  }
  return check;
}

std::string side_by_side(const std::vector<PatternRun>& runs) {
  std::vector<std::string> header{"metric"};
  for (const auto& r : runs) header.push_back(r.pattern.str());
  Table table(header);
  const auto add = [&](const std::string& label, auto cell) {
    std::vector<std::string> row{label};
    for (const auto& r : runs) row.push_back(cell(r, metrics_from(r.outcome.total)));
    table.add_row(row);
  };
  add("pruned tensors", [](const PatternRun& r, const PruneMetrics&) { return fmt::format("{}", r.outcome.tensors.size()); });
  add("pruned/total", [](const PatternRun&, const PruneMetrics& m) {
    return fmt::format("{}/{}", human_count(static_cast<double>(m.pruned_count)),
                       human_count(static_cast<double>(m.total_count)));
  });
  add("sparsity_percent", [](const PatternRun&, const PruneMetrics& m) { return fmt::format("{:.2f}", m.sparsity_percent); });
  add("approximation_error", [](const PatternRun&, const PruneMetrics& m) { return short_float(m.approximation_error); });
  add("relative_error", [](const PatternRun&, const PruneMetrics& m) { return short_float(m.relative_error); });
  add("retained_l1", [](const PatternRun&, const PruneMetrics& m) { return short_float(m.retained_l1); });
  add("kept_magnitude_mean", [](const PatternRun&, const PruneMetrics& m) { return short_float(m.kept_magnitude_mean); });
  add("pruned_magnitude_mean", [](const PatternRun&, const PruneMetrics& m) { return short_float(m.pruned_magnitude_mean); });
  add("bytes dense", [](const PatternRun& r, const PruneMetrics&) { return human_bytes(static_cast<double>(r.outcome.dense_bytes)); });
  add("bytes stored", [](const PatternRun& r, const PruneMetrics&) {
    return fmt::format("{} ({})", human_bytes(static_cast<double>(r.outcome.stored_bytes)), weight_format_name(r.format));
  });
  add("stored/dense", [](const PatternRun& r, const PruneMetrics&) {
    return fmt::format("{:.3f}", static_cast<double>(r.outcome.stored_bytes) / static_cast<double>(r.outcome.dense_bytes));
  });
  add("prune time (IO incl.)", [](const PatternRun& r, const PruneMetrics&) { return fmt::format("{:.3f} s", r.outcome.seconds); });
  return table.render();
}

int run(const DemoArgs& args) {
  std::error_code ec;
  std::filesystem::create_directories(args.out, ec);
  if (ec) return report_error(fmt::format("--out '{}': cannot create the folder: {}", args.out, ec.message()));

  std::string model = args.model;
  bool generated = false;
  if (model.empty() || !std::filesystem::is_regular_file(model)) {
    generated = true;
    fmt::print("NOTE: {}; using a GENERATED checkpoint instead: random weights (normal(0, 0.02), fixed seed) in\n"
               "      the layer shapes of SmolLM-135M (2 decoder layers, hidden 576, intermediate 1536), embeddings\n"
               "      cut to 4096 tokens. Its numbers say nothing about a trained model.\n",
               model.empty() ? "no --model given" : fmt::format("--model '{}' not found", model));
    model = (std::filesystem::path(args.out) / "generated-llm.safetensors").string();
    if (auto status = write_generated_checkpoint(model); !status.ok()) return report_error(status.error());
  }
  auto input = SafetensorsFile::open(model);
  if (!input.ok()) return report_error(input.error());
  size_t params = 0;
  size_t bytes = 0;
  for (const auto& info : input->tensors()) {
    params += static_cast<size_t>(shape_numel(info.shape));
    bytes += info.end - info.begin;
  }
  fmt::print("model: {}{}\n       {} tensors, {} parameters, {}\n", model, generated ? " (generated)" : "",
             input->tensors().size(), human_count(static_cast<double>(params)), human_bytes(static_cast<double>(bytes)));
  fmt::print("pruning (magnitude) every 2-D float tensor whose name does not match '{}'\n\n", kDefaultExclude);

  auto default_filter = NameFilter::make("", kDefaultExclude);
  if (!default_filter.ok()) return report_error(default_filter.error());
  keep_freed_blocks_in_heap();
  const std::string stem = std::filesystem::path(model).stem().string();
  std::vector<PatternRun> runs{{{2, 4}, WeightFormat::Sparse24, "", {}},
                               {{4, 8}, WeightFormat::NM, "", {}},
                               {{6, 8}, WeightFormat::NM, "", {}}};
  for (auto& r : runs) {
    PruneCheckpointJob job;
    job.input = model;
    job.selected = default_filter->predicate();
    job.pattern = r.pattern;
    job.format = r.format;
    r.output = (std::filesystem::path(args.out) /
                fmt::format("{}.{}-{}.{}.safetensors", stem, r.pattern.keep, r.pattern.group, weight_format_name(r.format)))
                   .string();
    job.output = r.output;
    Progress progress("pruning to " + r.pattern.str());
    job.on_tensor = progress.tensor_callback();
    auto outcome = prune_checkpoint(job);
    progress.clear();
    if (!outcome.ok()) return report_error(outcome.error());
    r.outcome = std::move(*outcome);
  }
  fmt::print("{}\n", side_by_side(runs));
  fmt::print("(totals over the pruned tensors, from summed counts and float64 sums; bytes: the pruned tensors as\n"
             " stored, values + 2 metadata bits per kept value for sparse24, values + 1-bit-per-element mask for nm)\n\n");

  bool all_good = true;
  fmt::print("outputs, read back with the inspect logic:\n");
  for (const auto& r : runs) {
    auto check = check_output(*input, r);
    if (!check.ok()) return report_error(check.error());
    const bool good = check->pruned == r.outcome.tensors.size() && check->complies == check->pruned &&
                      check->exact == check->pruned && check->unchanged == check->copied;
    all_good = all_good && good;
    fmt::print("  {} {}: {}/{} pruned tensors comply with {}, {}/{} decompress to the pruned weights bit for bit, "
               "{}/{} other tensors unchanged: {}\n",
               r.output, human_bytes(static_cast<double>(std::filesystem::file_size(r.output, ec))), check->complies,
               check->pruned, r.pattern.str(), check->exact, check->pruned, check->unchanged, check->copied,
               good ? "OK" : "FAILED");
  }
  if (!all_good) return report_error("demo: an output failed its check (see above)");
  fmt::print("\nsee one in detail: nmkit inspect {}\n", runs.front().output);
  return 0;
}

const bool demo_registered = register_command(CommandSpec{
    "demo",
    "The MiniLM checkpoint demo: prune to 2:4, 4:8 and 6:8, compare, write and check the outputs (make demo)",
    5,
    [](CLI::App& app) -> std::function<int()> {
      auto args = std::make_shared<DemoArgs>();
      app.add_option("--model", args->model, "Checkpoint to prune (.safetensors); a generated one when absent");
      app.add_option("--out", args->out, "Folder for the outputs")->capture_default_str();
      return [args] { return run(*args); };
    },
});

}  // namespace
}  // namespace nmkit::cli
