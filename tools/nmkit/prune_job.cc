#include "tools/nmkit/prune_job.h"

#include <malloc.h>

#include <chrono>
#include <memory>
#include <optional>
#include <set>
#include <fmt/core.h>

#include "tools/nmkit/cli_util.h"
#include "nmkit/format.h"
#include "nmkit/safetensors.h"

namespace nmkit::cli {
namespace {

// Library errors about a weight name the tensor; the CLI adds the file unless it is already there.
Error in_file(const std::string& file, const Error& error) { return error.in_file(file); }

// Lazily computed parts of one compressed weight: the first part's fill prunes and compresses, each
// part's fill copies its bytes, and the parts are released once both are written (one weight in
// flight at a time).
struct PackState {
  std::vector<OutputTensor> parts;
  int filled = 0;
};

struct Item {
  std::string name;
  TensorView weight;
  TensorView gradient;
  TensorView act_norms;
  ScoreInputs inputs;
  PrunedTensor result;
  PackState pack;
};

// Shapes of the stored parts, known before any weight is read so the writer can lay out the file.
struct PartShapes {
  Shape values;
  Shape side;  // meta or mask, U8
};

PartShapes part_shapes(WeightFormat format, Pattern pattern, int64_t rows, int64_t K) {
  if (format == WeightFormat::Sparse24) {
    Sparse24 geometry;
    geometry.K = K;
    return {{rows, geometry.K_pad() / 2}, {rows, geometry.meta_stride()}};
  }
  NMPacked geometry;
  geometry.pattern = pattern;
  geometry.K = K;
  return {{rows, geometry.groups() * pattern.keep}, {rows, geometry.mask_stride()}};
}

// A bad value found while pruning belongs to the file it came from: the library says which operand
// (weight, gradient, act_norms) it found it in.
const std::string& file_of_error(const PruneJob& job, const Error& error) {
  if (error.operand() == "gradient" && !job.grad_path.empty()) return job.grad_path;
  if (error.operand() == "act_norms" && !job.act_norms_path.empty()) return job.act_norms_path;
  return job.input;
}

Status prune_item(const PruneJob& job, Item& item, std::byte* dst) {
  auto sums = prune_into(item.weight, job.pattern, job.method, item.inputs, dst, item.name);
  if (!sums.ok()) return in_file(file_of_error(job, sums.error()), sums.error());
  item.result.sums = *sums;
  return ok_status();
}

// Prunes into `scratch`, compresses, and checks that the library's parts are what was declared. The
// scratch buffer is reused from weight to weight: a fresh allocation per weight cost a page fault per
// 4 KiB (measured: about 7% of `prune --format nm` on 4096x4096 f32 weights).
Status pack_item(const PruneJob& job, Item& item, const PartShapes& shapes, std::vector<std::byte>& scratch) {
  if (scratch.size() < item.weight.nbytes()) scratch.resize(item.weight.nbytes());
  NMKIT_TRY(prune_item(job, item, scratch.data()));
  const TensorView dense{item.weight.dtype, item.weight.shape, scratch.data()};
  size_t memory_bytes = 0;
  if (job.format == WeightFormat::Sparse24) {
    auto packed = compress_sparse24(dense, item.name);
    if (!packed.ok()) return in_file(job.input, packed.error());
    memory_bytes = packed->memory_bytes();
    item.pack.parts = packed_outputs(item.name, std::move(*packed));
  } else {
    auto packed = compress_nm(dense, job.pattern, item.name);
    if (!packed.ok()) return in_file(job.input, packed.error());
    memory_bytes = packed->memory_bytes();
    item.pack.parts = packed_outputs(item.name, std::move(*packed));
  }
  const auto& parts = item.pack.parts;
  NMKIT_ASSERT(parts.size() == 2);
  NMKIT_ASSERT(parts[0].shape == shapes.values && parts[0].dtype == item.weight.dtype);
  NMKIT_ASSERT(parts[1].shape == shapes.side && parts[1].dtype == DType::U8);
  NMKIT_ASSERT(memory_bytes == item.result.stored_bytes);
  return ok_status();
}

Status check_score_inputs(const PruneJob& job, const SafetensorsFile* grad, const SafetensorsFile* norms,
                          Item& item) {
  if (grad != nullptr) {
    const TensorInfo* info = grad->find(item.name);
    if (info == nullptr) {
      return Error(fmt::format("{}: tensor {}: missing (the gradient of weight {} of {})", job.grad_path,
                               quote_name(item.name), quote_name(item.name), job.input));
    }
    if (info->shape != item.weight.shape) {
      return Error(fmt::format("{}: tensor {}: gradient shape {} does not match the weight's shape {}",
                               job.grad_path, quote_name(item.name), shape_str(info->shape), shape_str(item.weight.shape)));
    }
    if (!is_prunable(info->dtype)) {
      return Error(fmt::format("{}: tensor {}: gradient dtype {} is not F32, F16 or BF16", job.grad_path,
                               quote_name(item.name), dtype_name(info->dtype)));
    }
    item.gradient = grad->view(*info);
    item.inputs.gradient = &item.gradient;
  }
  if (norms != nullptr) {
    const TensorInfo* info = norms->find(item.name);
    if (info == nullptr) {
      return Error(fmt::format("{}: tensor {}: missing (the input-feature norms of weight {} of {})",
                               job.act_norms_path, quote_name(item.name), quote_name(item.name), job.input));
    }
    const Shape expected{item.weight.cols()};
    if (info->shape != expected) {
      return Error(fmt::format("{}: tensor {}: norm shape {} does not match the weight's K, expected {}",
                               job.act_norms_path, quote_name(item.name), shape_str(info->shape), shape_str(expected)));
    }
    if (!is_prunable(info->dtype)) {
      return Error(fmt::format("{}: tensor {}: norm dtype {} is not F32, F16 or BF16", job.act_norms_path,
                               quote_name(item.name), dtype_name(info->dtype)));
    }
    item.act_norms = norms->view(*info);
    item.inputs.act_norms = &item.act_norms;
  }
  return ok_status();
}

Status check_method_inputs(const PruneJob& job) {
  const bool gradient = job.method == PruneMethod::Gradient;
  const bool wanda = job.method == PruneMethod::Wanda;
  if (gradient && job.grad_path.empty()) return Error("--method gradient: needs --grad G.safetensors");
  if (wanda && job.act_norms_path.empty()) return Error("--method wanda: needs --act-norms A.safetensors");
  if (!gradient && !job.grad_path.empty()) {
    return Error(fmt::format("--grad '{}': only used by --method gradient (method is {})", job.grad_path,
                             prune_method_name(job.method)));
  }
  if (!wanda && !job.act_norms_path.empty()) {
    return Error(fmt::format("--act-norms '{}': only used by --method wanda (method is {})", job.act_norms_path,
                             prune_method_name(job.method)));
  }
  return ok_status();
}

}  // namespace

Status check_format_pattern(WeightFormat format, Pattern pattern) {
  if (format == WeightFormat::Sparse24 && !(pattern.group == 4 && pattern.keep <= 2)) {
    return Error(fmt::format("--format sparse24: pattern {} does not give 2:4-compliant weights "
                             "(use 2:4 or 1:4, or --format nm)",
                             pattern.str()));
  }
  return ok_status();
}

Result<PreparedPrune> prepare_prune_job(const PruneJob& job) {
  const auto start = std::chrono::steady_clock::now();
  // Every compressed weight allocates its parts (tens of MiB for an LLM layer) and frees them once
  // written. glibc serves such blocks with mmap and returns them with munmap, so each weight paid a
  // page fault per 4 KiB again; keeping freed blocks in the heap lets the next weight reuse them.
  mallopt(M_MMAP_THRESHOLD, 1 << 30);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  NMKIT_TRY(check_format_pattern(job.format, job.pattern));
  NMKIT_TRY(check_method_inputs(job));
  auto filter = NameFilter::make(job.include, job.exclude);
  if (!filter.ok()) return filter.error();

  auto input = SafetensorsFile::open(job.input);
  if (!input.ok()) return in_file(job.input, input.error());
  std::optional<SafetensorsFile> grad, norms;
  if (!job.grad_path.empty()) {
    auto file = SafetensorsFile::open(job.grad_path);
    if (!file.ok()) return in_file(job.grad_path, file.error());
    grad.emplace(std::move(*file));
  }
  if (!job.act_norms_path.empty()) {
    auto file = SafetensorsFile::open(job.act_norms_path);
    if (!file.ok()) return in_file(job.act_norms_path, file.error());
    norms.emplace(std::move(*file));
  }
  auto stored = list_stored(*input);
  if (!stored.ok()) return in_file(job.input, stored.error());

  PruneOutcome outcome;
  Metadata metadata = input->metadata();
  std::vector<std::unique_ptr<Item>> items;
  std::vector<OutputTensor> outputs;
  std::vector<std::byte> scratch;  // the dense-masked weight before compression
  for (const auto& info : input->tensors()) outcome.input_bytes += info.end - info.begin;

  for (const StoredTensor& st : *stored) {
    // Weights already stored compressed, and anything that is not a 2-D float tensor selected by
    // name, pass through byte for byte (with their records, which stay in the metadata).
    // Slid weights too, whatever their format (issue 13, W1): pruning the [rows, K'] form would drop
    // the slide record and leave a weight that no longer matches its activations.
    const bool compressed = st.record.has_value() && st.record->format != WeightFormat::Dense;
    const bool slid = st.record.has_value() && st.record->slide.has_value();
    const TensorInfo* info = st.parts.size() == 1 ? st.parts[0] : nullptr;
    const bool selected = !compressed && !slid && info != nullptr && info->shape.size() == 2 &&
                          is_prunable(info->dtype) && shape_numel(info->shape) > 0 && filter->selected(st.name);
    if (!selected) {
      const size_t first = outputs.size();
      for (const TensorInfo* part : st.parts) outputs.push_back(OutputTensor::copy_of(part->name, input->view(*part)));
      if (compressed) {
        // Copied compressed weights are validated as inspect and linear would load them (issue 13,
        // W5), in the first part's fill so that only one weight is in memory at a time.
        const SafetensorsFile* file = &*input;
        outputs[first].fill = [file, &st, copy = std::move(outputs[first].fill)](std::byte* dst) -> Status {
          auto loaded = load_weight(*file, st);
          if (!loaded.ok()) return loaded.error().in_file(file->path());
          return copy(dst);
        };
      }
      outcome.copied_tensors += st.parts.size();
      continue;
    }
    auto item = std::make_unique<Item>();
    item->name = info->name;
    item->weight = input->view(*info);
    item->result.name = info->name;
    item->result.dtype = info->dtype;
    item->result.shape = info->shape;
    item->result.dense_bytes = item->weight.nbytes();
    NMKIT_TRY(check_score_inputs(job, grad ? &*grad : nullptr, norms ? &*norms : nullptr, *item));

    WeightRecord record;
    record.format = job.format;
    // sparse24 is a 2:4 format (checkpoint records say what the stored tensor complies with), so a
    // 1:4-pruned weight stored as sparse24 is recorded as 2:4; the report keeps the pruning pattern.
    record.pattern = job.format == WeightFormat::Sparse24 ? Pattern{2, 4} : job.pattern;
    record.dtype = info->dtype;
    record.shape = info->shape;
    metadata[record_key(item->name)] = encode_record(record);

    Item* raw = item.get();
    if (job.format == WeightFormat::Dense) {
      item->result.stored_bytes = item->result.dense_bytes;
      outputs.push_back(OutputTensor{item->name, info->dtype, info->shape,
                                     [&job, raw](std::byte* dst) { return prune_item(job, *raw, dst); }});
    } else {
      const PartShapes shapes = part_shapes(job.format, job.pattern, info->shape[0], info->shape[1]);
      item->result.stored_bytes = static_cast<size_t>(shape_numel(shapes.values)) * dtype_size(info->dtype) +
                                  static_cast<size_t>(shape_numel(shapes.side));
      const std::string side = job.format == WeightFormat::Sparse24 ? ".meta" : ".mask";
      const auto fill_part = [&job, raw, shapes, &scratch](size_t index, std::byte* dst) -> Status {
        // The writer fills tensors one after another (safetensors.h), so one scratch buffer serves all.
        if (raw->pack.parts.empty()) NMKIT_TRY(pack_item(job, *raw, shapes, scratch));
        NMKIT_TRY(raw->pack.parts[index].fill(dst));
        if (++raw->pack.filled == 2) raw->pack.parts.clear();
        return ok_status();
      };
      outputs.push_back(OutputTensor{item->name + ".values", info->dtype, shapes.values,
                                     [fill_part](std::byte* dst) { return fill_part(0, dst); }});
      outputs.push_back(OutputTensor{item->name + side, DType::U8, shapes.side,
                                     [fill_part](std::byte* dst) { return fill_part(1, dst); }});
    }
    items.push_back(std::move(item));
  }

  // A compressed weight's part names must not collide with another tensor of the file.
  std::set<std::string> seen;
  for (const auto& out : outputs) {
    if (!seen.insert(out.name).second) {
      return Error(fmt::format("{}: tensor {}: the output would hold two tensors of this name "
                               "(a compressed weight's part collides with an existing tensor)",
                               job.input, quote_name(out.name)));
    }
  }

  // Timing split for the summary line: time inside the fills (reading the input, pruning, packing,
  // copying) against everything else (opening, allocating and syncing the output).
  double fill_seconds = 0;
  for (auto& out : outputs) {
    out.fill = [inner = std::move(out.fill), &fill_seconds](std::byte* dst) {
      const auto begin = std::chrono::steady_clock::now();
      Status status = inner(dst);
      fill_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
      return status;
    };
  }

  WriteOptions write_settings;
  if (job.on_tensor) {
    write_settings.on_tensor = [&job](size_t i, size_t n, const OutputTensor& t) { job.on_tensor(i, n, t.name); };
  }
  auto pending = prepare_safetensors(job.output, outputs, metadata, write_settings);
  if (!pending.ok()) return pending.error();

  for (const auto& item : items) {
    outcome.total += item->result.sums;
    outcome.dense_bytes += item->result.dense_bytes;
    outcome.stored_bytes += item->result.stored_bytes;
    outcome.tensors.push_back(item->result);
  }
  outcome.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  outcome.fill_seconds = fill_seconds;
  return PreparedPrune{std::move(outcome), std::move(*pending)};
}

Result<PruneOutcome> run_prune_job(const PruneJob& job) {
  auto prepared = prepare_prune_job(job);
  if (!prepared.ok()) return prepared.error();
  NMKIT_TRY(prepared->output.commit());
  return std::move(prepared->outcome);
}

std::string prune_table(const PruneOutcome& outcome) {
  Table table({"tensor", "shape", "pruned/total", "approx_error", "relative_error", "kept_mean", "pruned_mean",
               "bytes_before", "bytes_after"});
  const auto row = [&](const std::string& name, const std::string& shape, const PruneSums& sums,
                       size_t before, size_t after) {
    const PruneMetrics m = metrics_from(sums);
    table.add_row({name, shape, fmt::format("{}/{}", m.pruned_count, m.total_count),
                   short_float(m.approximation_error), short_float(m.relative_error),
                   short_float(m.kept_magnitude_mean), short_float(m.pruned_magnitude_mean),
                   human_bytes(static_cast<double>(before)), human_bytes(static_cast<double>(after))});
  };
  for (const auto& t : outcome.tensors) row(t.name, shape_str(t.shape), t.sums, t.dense_bytes, t.stored_bytes);
  table.add_rule();
  row(fmt::format("total ({} tensors)", outcome.tensors.size()), "", outcome.total, outcome.dense_bytes,
      outcome.stored_bytes);
  return table.render();
}

nlohmann::json section3_metrics_json(const PruneSums& sums) {
  const PruneMetrics m = metrics_from(sums);
  return nlohmann::json{
      {"total_count", m.total_count},
      {"pruned_count", m.pruned_count},
      {"sparsity_percent", m.sparsity_percent},
      {"approximation_error", m.approximation_error},
      {"kept_magnitude_mean", m.kept_magnitude_mean},
      {"pruned_magnitude_mean", m.pruned_magnitude_mean},
      {"relative_error", m.relative_error},
      {"retained_l1", m.retained_l1},
  };
}

nlohmann::json metrics_json(const PruneSums& sums, size_t dense_bytes, size_t stored_bytes) {
  nlohmann::json out = section3_metrics_json(sums);
  out["memory_bytes"] = stored_bytes;
  out["dense_bytes"] = dense_bytes;
  return out;
}

nlohmann::json prune_report(const PruneJob& job, const PruneOutcome& outcome) {
  nlohmann::json tensors = nlohmann::json::object();
  for (const auto& t : outcome.tensors) tensors[t.name] = metrics_json(t.sums, t.dense_bytes, t.stored_bytes);
  return nlohmann::json{
      {"pattern", job.pattern.str()},
      {"method", std::string(prune_method_name(job.method))},
      {"format", std::string(weight_format_name(job.format))},
      {"tensors", std::move(tensors)},
      {"total", metrics_json(outcome.total, outcome.dense_bytes, outcome.stored_bytes)},
  };
}

}  // namespace nmkit::cli
