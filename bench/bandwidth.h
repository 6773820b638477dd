// The read bandwidth a decode kernel can reach on this machine (docs/design.md 14): decode reads
// every weight once, so bytes per token over this bandwidth is its floor, and a kernel's GB/s over
// it is its efficiency. `nmkit bench linear` and `nmkit bench model` print it beside their figures.
#pragma once

#include <cstddef>
#include <memory>

namespace nmkit::bench {

struct ReadBandwidth {
  double gbs = 0;             // the better of the two patterns below
  double one_stream_gbs = 0;  // each thread one sequential stream (the sparse and nm records)
  double four_rows_gbs = 0;   // each thread 4 rows in lockstep (dense rows, as the kernels read them)
  size_t bytes = 0;           // the buffer read per sample
  int threads = 0;
};

// A streaming read of a buffer far larger than the last-level cache (`bytes`, 0: four times it, at
// least 1 GiB and at most 1/16 of the memory) by `threads` threads (0: the pool's, as the kernels run),
// each reading its own contiguous part with the active ISA tier's widest loads (the decode kernels'
// access width; cpu/linear_kernels.h ReadStreamFn), in the two patterns the decode kernels stream.
// Medians of repeated full passes; a probe that reads less than decode achieves is wrong.
// The buffer is allocated and touched once, so that a run can probe beside each of its timed rounds
// (`nmkit bench model`, docs/design.md 13): the machine's bandwidth drifts within minutes, and a
// kernel's share of it is only meaningful against a probe taken next to it.
class ReadProbe {
 public:
  explicit ReadProbe(size_t bytes = 0, int threads = 0);
  ReadBandwidth measure() const;

 private:
  std::unique_ptr<std::byte[]> buffer_;
  size_t bytes_ = 0;
  int threads_ = 0;
};

ReadBandwidth measure_read_bandwidth(size_t bytes = 0, int threads = 0);

}  // namespace nmkit::bench
