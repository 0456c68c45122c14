// LoRA adapters served over the models: loaded at run time (POST /v1/load_lora_adapter,
// /v1/unload_lora_adapter, as vLLM names them) beside those the configuration names; a request
// names one as its `model` (ModelCatalog::resolve); their metrics.
#pragma once

#include <string>

#include "server/catalog.h"
#include "server/handler_table.h"

namespace autoglm {

class LoraRoutes {
 public:
  LoraRoutes(const ServerConfig& config, ModelCatalog& catalog) : config_(config), catalog_(catalog) {}
  void bind(HandlerTable& table);
  // The adapters of running and waiting requests, and those loaded, per model.
  void metrics(std::string& out);

 private:
  Reply load_adapter(const std::string& body);
  Reply unload_adapter(const std::string& body);

  const ServerConfig& config_;
  ModelCatalog& catalog_;
};

}  // namespace autoglm
