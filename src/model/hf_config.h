// A Hugging Face config.json read key by key: each accessor a one-line Error naming the file and key
// when the key is missing (without a fallback) or mistyped. JSON null reads as absent.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "nmkit/status.h"

namespace nmkit::model {

// A short rendering of a JSON value for messages.
inline std::string shown_json(const nlohmann::json& value) {
  std::string text = value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return text.size() > 60 ? text.substr(0, 60) + "..." : text;
}

class HfConfig {
 public:
  using json = nlohmann::json;
  HfConfig(std::string path, json value) : path_(std::move(path)), value_(std::move(value)) {}

  Result<int64_t> count(const std::string& key, std::optional<int64_t> fallback = std::nullopt) const {
    const json* v = find(key);
    if (v == nullptr) {
      if (fallback) return *fallback;
      return Error(path_ + ": no key '" + key + "'");
    }
    if (!v->is_number_integer() || v->get<int64_t>() < 1 || v->get<int64_t>() > std::numeric_limits<int32_t>::max()) {
      return Error(path_ + ": '" + key + "' is " + shown_json(*v) + ", expected a positive integer");
    }
    return v->get<int64_t>();
  }

  Result<double> number(const std::string& key, std::optional<double> fallback = std::nullopt) const {
    const json* v = find(key);
    if (v == nullptr) {
      if (fallback) return *fallback;
      return Error(path_ + ": no key '" + key + "'");
    }
    if (!v->is_number()) return Error(path_ + ": '" + key + "' is " + shown_json(*v) + ", expected a number");
    return v->get<double>();
  }

  // A number the model computes with in float32, positive and finite there (1e39 is as infinite as
  // 1e400: issue 24, item 5).
  Result<double> positive_float(const std::string& key, std::optional<double> fallback = std::nullopt) const {
    auto v = number(key, fallback);
    if (!v.ok()) return v.error();
    const auto value = static_cast<float>(*v);
    if (!(value > 0.0f) || !std::isfinite(value)) {
      return Error(path_ + ": '" + key + "' is " + shown_json(*find(key)) + ", expected a positive finite float32");
    }
    return *v;
  }

  Result<bool> flag(const std::string& key, bool fallback) const {
    const json* v = find(key);
    if (v == nullptr) return fallback;
    if (!v->is_boolean()) return Error(path_ + ": '" + key + "' is " + shown_json(*v) + ", expected true or false");
    return v->get<bool>();
  }

  Result<std::string> text(const std::string& key, std::optional<std::string> fallback = std::nullopt) const {
    const json* v = find(key);
    if (v == nullptr) {
      if (fallback) return *fallback;
      return Error(path_ + ": no key '" + key + "'");
    }
    if (!v->is_string()) return Error(path_ + ": '" + key + "' is " + shown_json(*v) + ", expected a string");
    return v->get<std::string>();
  }

  // A list of strings, empty when absent.
  Result<std::vector<std::string>> texts(const std::string& key) const {
    const json* v = find(key);
    std::vector<std::string> out;
    if (v == nullptr) return out;
    if (!v->is_array()) return Error(path_ + ": '" + key + "' is " + shown_json(*v) + ", expected a list of strings");
    for (const json& e : *v) {
      if (!e.is_string()) return Error(path_ + ": '" + key + "' holds " + shown_json(e) + ", expected strings");
      out.push_back(e.get<std::string>());
    }
    return out;
  }

  const json* find(const std::string& key) const {
    const auto it = value_.find(key);
    return it == value_.end() || it->is_null() ? nullptr : &*it;
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  json value_;
};

}  // namespace nmkit::model
