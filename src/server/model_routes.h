// What the served models are and what their tokenizers and embeddings say: GET /v1/models
// (models, routes, adapters), GET /v1/models/{id}, POST /tokenize, /detokenize and
// /v1/embeddings.
#pragma once

#include <string>

#include "server/catalog.h"
#include "server/handler_table.h"

namespace autoglm {

class ModelRoutes {
 public:
  ModelRoutes(const ServerConfig& config, ModelCatalog& catalog) : config_(config), catalog_(catalog) {}
  void bind(HandlerTable& table);

 private:
  Reply models();
  Reply model(const std::string& id);
  Reply tokenize(const std::string& body);
  Reply detokenize(const std::string& body);
  Reply embeddings(const std::string& body);

  const ServerConfig& config_;
  ModelCatalog& catalog_;
};

}  // namespace autoglm
