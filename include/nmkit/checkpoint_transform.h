// Streaming a safetensors checkpoint through a per-tensor transform: the one loop behind pruning,
// sliding and quantizing whole checkpoints (include/nmkit/prune_checkpoint.h, slide_checkpoint.h,
// quantize_checkpoint.h), and the place any other checkpoint rewrite plugs in.
//
// The driver opens the input, lists its logical tensors (include/nmkit/checkpoint.h: a plain tensor,
// or the parts of a compressed weight with their record), and asks the transform for a plan per
// selected tensor: copy it unchanged, drop it, or replace it by new output tensors (with the record
// that describes them). Every plan is made before the output exists, so everything that can be
// checked without reading weights fails with no file created. The output is then written through
// prepare_safetensors (include/nmkit/safetensors.h): each replaced tensor is produced by its fill,
// in file order, straight into the output's mapping, so a large model is never held twice; any
// failing fill leaves no output (the temporary is removed, an existing file is untouched). Output
// name collisions are the writer's check ("listed twice").
//
// Thread safety: one call runs on the calling thread (fills may use parallel_for inside); callbacks
// are called from that thread only.
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "nmkit/checkpoint.h"
#include "nmkit/files.h"
#include "nmkit/safetensors.h"
#include "nmkit/status.h"

namespace nmkit {

// What becomes of one logical input tensor.
enum class TensorAction {
  Copy,     // every part byte for byte, its record (if any) kept
  Drop,     // not written; its record (if any) removed
  Replace,  // written as `outputs`; its record replaced by `record` (or removed when none)
};

struct TensorPlan {
  TensorAction action = TensorAction::Copy;
  std::vector<OutputTensor> outputs;    // Replace: filled lazily, in this order, one after another
  std::optional<WeightRecord> record;   // Replace: stored under record_key(name)

  static TensorPlan copy() { return {}; }
  static TensorPlan drop() { return {TensorAction::Drop, {}, std::nullopt}; }
  static TensorPlan replace(std::vector<OutputTensor> outputs, std::optional<WeightRecord> record = std::nullopt) {
    return {TensorAction::Replace, std::move(outputs), std::move(record)};
  }
};

// Decides the plan of one selected tensor, before any output exists. The StoredTensor and the file
// outlive the write, so fills may keep pointers to them. An Error stops the job (nothing written);
// it should name its file and tensor (the driver passes it on unchanged).
using TensorTransform = std::function<Result<TensorPlan>(const SafetensorsFile& input, const StoredTensor& tensor)>;

// How the input's tensors are listed for the transform.
enum class TensorListing {
  Logical,      // list_stored: compressed weights as one tensor with their record (checked)
  FileTensors,  // every file tensor on its own, records ignored (activation files)
};

// One logical input tensor and what became of it, in file order.
struct TransformedTensorRecord {
  std::string name;
  TensorAction action = TensorAction::Copy;
  size_t parts_in = 0;       // file tensors it was made of
  size_t parts_out = 0;      // file tensors written for it
  size_t bytes_in = 0;
  size_t bytes_out = 0;
};

struct CheckpointTransformOutcome {
  std::vector<TransformedTensorRecord> tensors;
  size_t replaced = 0;      // logical tensors the transform replaced
  size_t copied_parts = 0;  // file tensors copied unchanged
  size_t dropped_parts = 0; // file tensors left out
  size_t input_bytes = 0;   // data section of the input
  double seconds = 0;       // open to fsync, IO included
  double fill_seconds = 0;  // of which inside the fills: reading, transforming, copying
};

struct CheckpointTransformOptions {
  std::string input;
  std::string output;
  TensorListing listing = TensorListing::Logical;
  // Which names the transform sees (null: every name); the others get `unselected`.
  std::function<bool(std::string_view name)> selected;
  TensorAction unselected = TensorAction::Copy;  // Copy or Drop
  bool keep_metadata = true;  // start from the input's __metadata__ (records of copied weights with it)
  Metadata metadata;          // added to (and overriding) the output's metadata
  // Called once every tensor is planned, before the output is created (seconds and fill_seconds
  // not yet set): an Error stops the job with nothing written, say a transform that found nothing.
  std::function<Status(const CheckpointTransformOutcome& planned)> on_planned;
  // Progress: called before output tensor i of n is filled (the CLI shows it on a terminal only).
  std::function<void(size_t i, size_t n, const std::string& name)> on_tensor;
};

// The whole job up to the rename: the output is complete and fsynced under its temporary name, so a
// caller can prepare its other outputs (a report) before either replaces anything.
struct PreparedCheckpoint {
  CheckpointTransformOutcome outcome;
  PendingFile output;
};
Result<PreparedCheckpoint> prepare_checkpoint_transform(const CheckpointTransformOptions& options,
                                                        const TensorTransform& transform);

// The same, committed.
Result<CheckpointTransformOutcome> transform_checkpoint(const CheckpointTransformOptions& options,
                                                        const TensorTransform& transform);

}  // namespace nmkit
