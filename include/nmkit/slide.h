// SlideSparse (arXiv 2603.05232): a weight compliant with keep:2N (keep <= 2N-2) rewritten as a 2:4
// weight over overlapping windows, and the lifting of activations that makes the product unchanged
// (docs/design.md section 5).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "nmkit/format.h"
#include "nmkit/pattern.h"
#include "nmkit/slide_geometry.h"
#include "nmkit/status.h"
#include "nmkit/tensor.h"

namespace nmkit {

// A slid weight and the geometry that produced it.
// Layout: weight (rows, K_prime) in the input dtype, dense-masked: within each output group of
// 4(N-1) columns, window w holds at most two non-zeros (2:4), columns from K_prime_raw on are zero.
struct SlidWeight {
  SlideGeometry geometry;
  Tensor weight;
};

// Slides W [rows, K] by greedy window placement: per row and group, windows w = 0..N-2 and lanes
// 0..3 in order; a slot takes W[i] when W[i] != 0, i is not yet placed and the window holds fewer
// than two values. Values are copied bit for bit. Any dtype (a floating -0 counts as zero).
// Errors: a pattern that cannot slide (from SlideGeometry::make), W not 2-D or K != geometry.K, and
// a group with more non-zeros than the pattern allows: "NAME: row R, group G (columns a..b) has C
// non-zeros; pattern P allows at most KEEP".
Result<SlidWeight> slide(const TensorView& w, Pattern pattern, int align = 32,
                         std::string_view name = "");
Result<Tensor> slide(const TensorView& w, const SlideGeometry& geometry, std::string_view name = "");
// The slid weight compressed as canonical sparse24 (K_prime is a multiple of 4, so no padding).
Result<Sparse24> slide_sparse24(const TensorView& w, const SlideGeometry& geometry,
                                std::string_view name = "");

// The index map: entry j is the input column feeding output column j, or -1 (zero), for j < K_prime.
std::vector<int64_t> lift_index_map(const SlideGeometry& geometry);
// Lifting of activations X [M, K] -> X' [M, K_prime]: X'[m, j] = X[m, i(j)], 0 for padding. Any
// dtype; values are copied bit for bit. An Error when X is not 2-D or its K differs from geometry.K.
Result<Tensor> lift(const TensorView& x, const SlideGeometry& geometry, std::string_view name = "");

}  // namespace nmkit
