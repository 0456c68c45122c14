// The handler of each Endpoint of the route table (server/http/route_table.h): each handler
// group binds its own endpoints, and dispatch calls the one the request's route names.
#pragma once

#include <array>
#include <functional>

#include "server/api/reply.h"
#include "server/http/route_table.h"

namespace autoglm {

// A route's handler: the request and what its route matched (the path's parameters).
using RouteHandler = std::function<Reply(const HttpRequest&, const RouteLookup&)>;

class HandlerTable {
 public:
  void bind(Endpoint endpoint, RouteHandler handler) { handlers_[size_t(endpoint)] = std::move(handler); }
  // The endpoint's handler (empty when no group bound it: a 404).
  const RouteHandler& of(Endpoint endpoint) const { return handlers_[size_t(endpoint)]; }

 private:
  std::array<RouteHandler, kEndpointCount> handlers_;
};

}  // namespace autoglm
