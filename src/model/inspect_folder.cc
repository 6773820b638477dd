// inspect_path (include/nmkit/inspect.h): a Hugging Face model folder is inspected through the files
// ModelSource reads, which lives above src/io (issue 24, item 7: `inspect HFDIR` used to say "starts
// with bytes []").
#include <sys/stat.h>

#include "nmkit/inspect.h"
#include "nmkit/model_source.h"

namespace nmkit {

Result<std::vector<InspectedTensor>> inspect_path(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return inspect_file(path);
  auto source = ModelSource::open(path);
  if (!source.ok()) return source.error();
  std::vector<InspectedTensor> result;
  for (const std::string& file : source->input_files()) {  // its safetensors files, shard after shard
    if (!file.ends_with(".safetensors")) continue;
    auto tensors = inspect_file(file);
    if (!tensors.ok()) return tensors.error();
    for (InspectedTensor& t : *tensors) result.push_back(std::move(t));
  }
  return result;
}

}  // namespace nmkit
