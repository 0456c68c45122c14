// `routes:` in the server's YAML: each route a mapping with exactly one of rules, cascade or
// split. Errors name the key path (routes.NAME.split.arms[1].weight) and the line.
#pragma once

#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "autoglm/status.h"
#include "server/config/config_reader.h"
#include "server/routing/routing.h"

namespace autoglm {

Status read_routes(const ConfigReader& r, const YAML::Node& node, RouteTable& routes);
// Every model a route names is served, and no route has a model's name.
Status check_routes(const RouteTable& routes, const std::vector<std::string>& models, const std::string& origin);

}  // namespace autoglm
