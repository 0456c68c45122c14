// Reads YAML configuration values; errors name the file, the line and the key path
// ("config.yaml:12: 'routes.ab.split.arms' ...").
#pragma once

#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "autoglm/status.h"

namespace autoglm {

class ConfigReader {
 public:
  explicit ConfigReader(std::string origin) : origin_(std::move(origin)) {}

  Status error(const YAML::Node& node, const std::string& key, const std::string& what) const {
    return invalid_argument(origin_ + ":" + std::to_string(node.Mark().line + 1) + ": '" + key + "' " + what);
  }

  template <typename T>
  Status scalar(const YAML::Node& node, const std::string& key, T& out) const {
    if (!node.IsScalar()) return error(node, key, "must be a single value");
    try {
      out = node.as<T>();
    } catch (const YAML::Exception&) {
      return error(node, key, "has a value of the wrong type: '" + node.Scalar() + "'");
    }
    return Status::ok();
  }

  template <typename T>
  Status ranged(const YAML::Node& node, const std::string& key, T& out, T lo, T hi) const {
    AUTOGLM_RETURN_IF_ERROR(scalar(node, key, out));
    if (out < lo || out > hi)
      return error(node, key, "must be between " + std::to_string(lo) + " and " + std::to_string(hi));
    return Status::ok();
  }

  Status strings(const YAML::Node& node, const std::string& key, std::vector<std::string>& out) const {
    if (node.IsScalar()) {
      out = {node.Scalar()};
      return Status::ok();
    }
    if (!node.IsSequence()) return error(node, key, "must be a string or a list of strings");
    out.clear();
    for (const auto& item : node) {
      if (!item.IsScalar()) return error(item, key, "must hold strings only");
      out.push_back(item.Scalar());
    }
    return Status::ok();
  }

  const std::string& origin() const { return origin_; }

 private:
  std::string origin_;
};

}  // namespace autoglm
