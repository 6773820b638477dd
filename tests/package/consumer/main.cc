// Uses the installed nmkit: prune a weight to 2:4, write and read it back as safetensors. Exit 0 and
// "consumer OK" only when every step gave what it must.
#include <cstdio>
#include <string>
#include <vector>

#include "nmkit/nmkit.h"

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  const std::string path = std::string(argv[1]) + "/w.safetensors";
  std::vector<float> w{4, -1, 3, 2, 0.5f, -6, 1, 5};  // two groups of 4: keeps 4,3 and -6,5
  const nmkit::Tensor weight = nmkit::Tensor::from_f32(w, {2, 4});
  auto pruned = nmkit::prune(weight.view(), *nmkit::Pattern::parse("2:4"), nmkit::PruneMethod::Magnitude);
  if (!pruned) return std::fprintf(stderr, "%s\n", pruned.error().message().c_str()), 1;
  const nmkit::Status written =
      nmkit::write_safetensors(path, {nmkit::OutputTensor::owning("w", std::move(pruned->pruned))});
  if (!written) return std::fprintf(stderr, "%s\n", written.error().message().c_str()), 1;
  auto file = nmkit::SafetensorsFile::open(path);
  if (!file) return std::fprintf(stderr, "%s\n", file.error().message().c_str()), 1;
  auto view = file->view("w");
  if (!view) return 1;
  const float* out = reinterpret_cast<const float*>(view->data);
  const std::vector<float> expected{4, 0, 3, 0, 0, -6, 0, 5};
  for (size_t i = 0; i < expected.size(); ++i) {
    if (out[i] != expected[i]) return std::fprintf(stderr, "element %zu is %g\n", i, out[i]), 1;
  }
  std::printf("consumer OK\n");
  return 0;
}
