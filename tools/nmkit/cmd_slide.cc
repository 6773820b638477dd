// nmkit slide IN -o OUT --pattern 6:8 [--align 32] [--format dense|sparse24]: rewrites every selected
// keep:2N-compliant weight as its SlideSparse 2:4 form [rows, K'] (docs/design.md section 5), records the
// geometry in __metadata__ and prints K, K', expansion and the ideal speedup N/(N-1) per tensor.
#include <cstring>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>
#include <fmt/core.h>

#include "nmkit/checkpoint.h"
#include "tools/nmkit/cli_util.h"
#include "tools/nmkit/command.h"
#include "nmkit/files.h"
#include "tools/nmkit/prune_job.h"
#include "nmkit/slide.h"

namespace nmkit::cli {
namespace {

struct SlideArgs {
  std::string input;
  std::string output;
  std::string pattern;
  int align = 32;
  std::string format = "dense";
  std::string include;
  std::string exclude = kDefaultExclude;
};

// One weight to slide; its parts are filled lazily by the writer (one weight in memory at a time).
struct SlideItem {
  std::string name;
  const StoredTensor* stored = nullptr;
  DType dtype = DType::F32;
  int64_t rows = 0;
  SlideGeometry geometry;
  std::optional<Sparse24> packed;  // sparse24 output between the fills of its two parts
};

// The weight as a dense-masked tensor (compressed inputs are decompressed).
Result<Tensor> load_dense(const SafetensorsFile& file, const StoredTensor& stored) {
  auto loaded = load_weight(file, stored);
  if (!loaded.ok()) return loaded.error();
  if (const auto* view = std::get_if<TensorView>(&*loaded)) return Tensor::copy_of(*view);
  if (const auto* s24 = std::get_if<Sparse24>(&*loaded)) return decompress(*s24);
  return decompress(std::get<NMPacked>(*loaded));
}

Error slide_error(const SlideArgs& args, const Error& error) {
  return Error(fmt::format("{}: {}; run `nmkit prune {} -o PRUNED.safetensors --pattern {}` first",
                           args.input, error.message(), args.input, args.pattern));
}

Result<Tensor> slide_dense(const SlideArgs& args, const SafetensorsFile& file, const SlideItem& item) {
  auto dense = load_dense(file, *item.stored);
  if (!dense.ok()) return dense.error().with_context(args.input + ": ");
  auto slid = slide(dense->view(), item.geometry, item.name);
  if (!slid.ok()) return slide_error(args, slid.error());
  return std::move(*slid);
}

int run(const SlideArgs& args) {
  auto pattern = Pattern::parse(args.pattern);
  if (!pattern.ok()) return report_error(pattern.error().with_context("--pattern: "));
  // Checks the pattern and the alignment before any file is opened.
  if (auto probe = SlideGeometry::make(*pattern, 1, args.align); !probe.ok()) {
    return report_error(probe.error().with_context(fmt::format("--pattern {} --align {}: ", args.pattern, args.align)));
  }
  auto format = parse_weight_format(args.format);
  if (!format.ok()) return report_error(format.error().with_context("--format: "));
  if (*format == WeightFormat::NM) {
    return report_error("--format nm: a slid weight is 2:4; use dense or sparse24");
  }
  if (auto distinct = check_distinct_files({{"-o", args.output}}, {{"input", args.input}}); !distinct.ok()) {
    return report_error(distinct.error());
  }
  auto filter = NameFilter::make(args.include, args.exclude);
  if (!filter.ok()) return report_error(filter.error());

  auto file = SafetensorsFile::open(args.input);
  if (!file.ok()) return report_error(file.error());
  auto stored = list_stored(*file);
  if (!stored.ok()) return report_error(stored.error().with_context(args.input + ": "));

  Metadata metadata = file->metadata();
  std::vector<std::unique_ptr<SlideItem>> items;
  std::vector<OutputTensor> outputs;
  size_t copied = 0;
  for (const StoredTensor& st : *stored) {
    const TensorInfo* info = st.parts.size() == 1 ? st.parts[0] : nullptr;
    DType dtype = info != nullptr ? info->dtype : DType::U8;
    Shape shape = info != nullptr ? info->shape : Shape{};
    if (st.record) {
      dtype = st.record->dtype;
      shape = st.record->shape;
    }
    const bool already_slid = st.record && st.record->slide.has_value();
    const bool selected = !already_slid && (st.record || info != nullptr) && shape.size() == 2 &&
                          is_prunable(dtype) && shape[0] > 0 && shape[1] > 0 && filter->selected(st.name);
    if (!selected) {
      for (const TensorInfo* part : st.parts) outputs.push_back(OutputTensor::copy_of(part->name, file->view(*part)));
      copied += st.parts.size();
      continue;
    }
    auto geometry = SlideGeometry::make(*pattern, shape[1], args.align);
    if (!geometry.ok()) return report_error(geometry.error().with_context(args.input + ": tensor " + quote_name(st.name) + ": "));
    auto item = std::make_unique<SlideItem>();
    item->name = st.name;
    item->stored = &st;
    item->dtype = dtype;
    item->rows = shape[0];
    item->geometry = *geometry;

    WeightRecord record;
    record.format = *format;
    record.pattern = Pattern{2, 4};  // what the stored tensor complies with
    record.dtype = dtype;
    record.shape = {item->rows, geometry->K_prime()};
    record.slide = *geometry;
    metadata[record_key(st.name)] = encode_record(record);

    SlideItem* raw = item.get();
    const SafetensorsFile* in = &*file;
    if (*format == WeightFormat::Dense) {
      outputs.push_back(OutputTensor{st.name, dtype, record.shape, [&args, in, raw](std::byte* dst) -> Status {
                                       auto slid = slide_dense(args, *in, *raw);
                                       if (!slid.ok()) return slid.error();
                                       std::memcpy(dst, slid->data(), slid->nbytes());
                                       return ok_status();
                                     }});
    } else {
      const int64_t K_prime = geometry->K_prime();  // a multiple of 4: no sparse24 padding
      outputs.push_back(OutputTensor{st.name + ".values", dtype, {item->rows, K_prime / 2},
                                     [&args, in, raw](std::byte* dst) -> Status {
                                       auto slid = slide_dense(args, *in, *raw);
                                       if (!slid.ok()) return slid.error();
                                       auto packed = compress_sparse24(slid->view(), raw->name);
                                       if (!packed.ok()) return packed.error().with_context(args.input + ": ");
                                       std::memcpy(dst, packed->values.data(), packed->values.nbytes());
                                       raw->packed = std::move(*packed);
                                       return ok_status();
                                     }});
      outputs.push_back(OutputTensor{st.name + ".meta", DType::U8, {item->rows, (K_prime + 7) / 8},
                                     [raw](std::byte* dst) -> Status {
                                       NMKIT_ASSERT(raw->packed.has_value());  // .values is filled first
                                       std::memcpy(dst, raw->packed->meta.data(), raw->packed->meta.nbytes());
                                       raw->packed.reset();
                                       return ok_status();
                                     }});
    }
    items.push_back(std::move(item));
  }

  std::set<std::string> seen;
  for (const auto& out : outputs) {
    if (!seen.insert(out.name).second) {
      return report_error(fmt::format("{}: tensor {}: the output would hold two tensors of this name "
                                      "(a sparse24 part collides with an existing tensor)",
                                      args.input, quote_name(out.name)));
    }
  }

  Progress progress("sliding");
  WriteOptions options;
  if (progress.enabled()) {
    options.on_tensor = [&progress](size_t i, size_t n, const OutputTensor& t) { progress.update(i, n, t.name); };
  }
  Status written = write_safetensors(args.output, outputs, metadata, options);
  progress.clear();
  if (!written.ok()) return report_error(written.error());

  Table table({"tensor", "shape", "K", "K'", "expansion", "ideal speedup"});
  for (const auto& item : items) {
    const SlideGeometry& g = item->geometry;
    table.add_row({item->name, shape_str({item->rows, g.K}), std::to_string(g.K), std::to_string(g.K_prime()),
                   fmt::format("{:.4f}", static_cast<double>(g.K_prime()) / static_cast<double>(g.K)),
                   fmt::format("{:.4f}", g.ideal_speedup())});
  }
  fmt::print("{}", table.render());
  fmt::print("slid {} tensors from {} onto 2:4 windows (N {}, window 4, stride 2, align {}, format {}), copied {} "
             "unchanged; wrote {}\n",
             items.size(), pattern->str(), pattern->N(), args.align, weight_format_name(*format), copied, args.output);
  if (items.empty()) {
    fmt::print("note: no tensor was selected (2-D F32/F16/BF16 not already slid, --include '{}', --exclude '{}')\n",
               args.include, args.exclude);
  }
  return 0;
}

const bool registered = register_command(CommandSpec{
    "slide",
    "Slide keep:2N weights (6:8, 4:6, 8:10, ...) onto 2:4 windows for 2:4 sparse GEMMs (SlideSparse)",
    20,
    [](CLI::App& app) -> std::function<int()> {
      auto args = std::make_shared<SlideArgs>();
      app.add_option("input", args->input, "Input checkpoint (.safetensors), pruned to --pattern")->required();
      app.add_option("-o,--output", args->output, "Output checkpoint (written atomically)")->required();
      app.add_option("--pattern", args->pattern, "keep:2N pattern the weights comply with, keep <= 2N-2 (6:8, 4:6, "
                                                 "8:10, 14:16, ...)")
          ->required();
      app.add_option("--align", args->align, "K' is rounded up to a multiple of this (a multiple of 4; 32 suits "
                                             "cuSPARSELt's 8-bit types, 16 its 16-bit ones)")
          ->capture_default_str();
      app.add_option("--format", args->format, "dense (masked [rows, K']) | sparse24 (NAME.values + NAME.meta)")
          ->capture_default_str();
      app.add_option("--include", args->include, "Slide only names where this regex is found (default: all)");
      app.add_option("--exclude", args->exclude, "Never slide names where this regex is found")->capture_default_str();
      return [args] { return run(*args); };
    },
});

}  // namespace
}  // namespace nmkit::cli
