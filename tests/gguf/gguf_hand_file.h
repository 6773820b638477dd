// GGUF files built byte by byte in tests (independent of write_gguf), with every field settable so
// that each can be corrupted on its own.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace nmkit::test {

// Little-endian byte appender.
struct Bytes {
  std::vector<uint8_t> b;
  template <class T>
  Bytes& put(T v) {
    uint8_t raw[sizeof(T)];
    std::memcpy(raw, &v, sizeof(T));
    b.insert(b.end(), raw, raw + sizeof(T));
    return *this;
  }
  Bytes& str(const std::string& s) {
    put<uint64_t>(s.size());
    b.insert(b.end(), s.begin(), s.end());
    return *this;
  }
  Bytes& append(const std::vector<uint8_t>& more) {
    b.insert(b.end(), more.begin(), more.end());
    return *this;
  }
};

struct HandTensor {
  std::string name;
  std::vector<uint64_t> ne;
  uint32_t type = 0;
  uint64_t offset = 0;
  uint32_t n_dims_override = 0;  // when non-zero, written instead of ne.size()
};

struct HandFile {
  uint32_t version = 3;
  std::vector<std::vector<uint8_t>> kvs;  // each: key string, u32 type, payload
  std::vector<HandTensor> tensors;
  uint32_t alignment = 32;        // used to pad to the data section
  std::vector<uint8_t> data;      // the data section
  int64_t kv_count = -1;          // when >= 0, written instead of kvs.size()
  int64_t tensor_count = -1;      // when >= 0, written instead of tensors.size()

  std::vector<uint8_t> bytes() const {
    Bytes out;
    out.b = {'G', 'G', 'U', 'F'};
    out.put<uint32_t>(version);
    out.put<uint64_t>(tensor_count >= 0 ? static_cast<uint64_t>(tensor_count) : tensors.size());
    out.put<uint64_t>(kv_count >= 0 ? static_cast<uint64_t>(kv_count) : kvs.size());
    for (const auto& kv : kvs) out.append(kv);
    for (const HandTensor& t : tensors) {
      out.str(t.name);
      out.put<uint32_t>(t.n_dims_override ? t.n_dims_override : static_cast<uint32_t>(t.ne.size()));
      for (uint64_t d : t.ne) out.put<uint64_t>(d);
      out.put<uint32_t>(t.type);
      out.put<uint64_t>(t.offset);
    }
    while (out.b.size() % alignment != 0) out.b.push_back(0);
    out.append(data);
    return out.b;
  }
};

// One key-value: key, type, then the payload the caller appends.
inline Bytes kv_head(const std::string& key, uint32_t type) {
  Bytes out;
  out.str(key).put<uint32_t>(type);
  return out;
}

}  // namespace nmkit::test
