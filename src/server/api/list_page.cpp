#include "server/api/list_page.h"

#include <cstdlib>

namespace autoglm {

PageQuery page_query(const std::string& target) {
  PageQuery q;
  const size_t mark = target.find('?');
  for (size_t start = mark == std::string::npos ? target.size() : mark + 1; start < target.size();) {
    const size_t end = std::min(target.find('&', start), target.size());
    const std::string pair = target.substr(start, end - start);
    start = end + 1;
    const size_t eq = pair.find('=');
    const std::string key = pair.substr(0, eq), value = eq == std::string::npos ? "" : pair.substr(eq + 1);
    if (key == "limit") {
      char* rest = nullptr;
      q.limit = std::strtoll(value.c_str(), &rest, 10);
      if (value.empty() || *rest || q.limit < 1 || q.limit > 100) bad("limit", "'limit' must be between 1 and 100");
    } else if (key == "after") {
      q.after = value;
    } else if (!key.empty()) {
      q.other[key] = value;
    }
  }
  return q;
}

}  // namespace autoglm
