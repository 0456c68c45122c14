// What the served models are and what their tokenizers and embeddings say: GET /v1/models
// (models with their status, routes, adapters), GET /v1/models/{id}, POST /models/load and
// /models/unload, POST /tokenize, /detokenize and /v1/embeddings.
#pragma once

#include <string>

#include "server/catalog.h"
#include "server/handler_table.h"

namespace autoglm {

class ModelRoutes {
 public:
  ModelRoutes(const ServerConfig& config, ModelCatalog& catalog) : config_(config), catalog_(catalog) {}
  void bind(HandlerTable& table);
  // Each model's status (a gauge per status, 1 on the current one) and the process's resident
  // memory (it drops when a model unloads or sleeps).
  void metrics(std::string& out) const;

 private:
  Reply models();
  Reply model(const std::string& id);
  Reply load_model(const std::string& body);
  Reply unload_model(const std::string& body);
  json served_object(const ModelService& m, const std::string& id);
  Reply change_model(const std::string& body, Status (ModelShelf::*ask)(ModelService&));
  Reply tokenize(const std::string& body);
  Reply detokenize(const std::string& body);
  Reply embeddings(const std::string& body);

  const ServerConfig& config_;
  ModelCatalog& catalog_;
};

}  // namespace autoglm
