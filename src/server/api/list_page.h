// OpenAI's paged lists (GET /v1/jobs, /v1/files, /v1/batches): ?limit=&after= and filters in the
// query, {"object": "list", "data", "first_id", "last_id", "has_more"} in the answer.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "server/api/request_params.h"

namespace autoglm {

struct PageQuery {
  int64_t limit = 20;
  std::string after;                         // the id the previous page ended with
  std::map<std::string, std::string> other;  // the rest of the query (filters)
};

// A bad limit is a 400 naming 'limit' (thrown as bad() does).
PageQuery page_query(const std::string& target);

// `items` (each with an `id`) as fetched with limit + 1 (the extra one says that more follow),
// each shown by `to_json`.
template <class T, class ToJson>
json page_json(const std::vector<T>& items, int64_t limit, ToJson to_json) {
  const bool more = int64_t(items.size()) > limit;
  const size_t n = more ? size_t(limit) : items.size();
  json data = json::array();
  for (size_t i = 0; i < n; ++i) data.push_back(to_json(items[i]));
  return {{"object", "list"},
          {"data", std::move(data)},
          {"first_id", n ? json(items.front().id) : json(nullptr)},
          {"last_id", n ? json(items[n - 1].id) : json(nullptr)},
          {"has_more", more}};
}

}  // namespace autoglm
