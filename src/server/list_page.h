// OpenAI's paged lists (GET /v1/jobs, /v1/files, /v1/batches): ?limit=&after= and filters in the
// query, {"object": "list", "data", "first_id", "last_id", "has_more"} in the answer.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "server/request_params.h"

namespace autoglm {

struct PageQuery {
  int64_t limit = 20;
  std::string after;                         // the id the previous page ended with
  std::map<std::string, std::string> other;  // the rest of the query (filters)
};

// A bad limit is a 400 naming 'limit' (thrown as bad() does).
PageQuery page_query(const std::string& target);

// `items` as fetched with limit + 1 (the extra one says that more follow) and their ids.
json page_json(json items, const std::vector<std::string>& ids, int64_t limit);

}  // namespace autoglm
