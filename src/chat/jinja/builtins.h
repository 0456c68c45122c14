// Filters, tests, methods of values and global functions of the Jinja subset.
#pragma once

#include <functional>
#include <string>

#include "chat/jinja/value.h"

namespace autoglm::jinja {

// The items a for loop or a filter sees: list items, dict keys, string characters;
// nothing for none/undefined. `what` names the caller in the error for other types.
Array iterate(const Value& v, const char* what);

bool run_test(const std::string& name, const Value& v, const CallArgs& args);
Value run_filter(const std::string& name, const Value& v, const CallArgs& args);
// x.name: a dict entry, or a bound method of strings, dicts and lists; undefined if none.
Value get_attribute(const Value& v, const std::string& name);
// Globals every template sees: raise_exception, namespace, range, dict, strftime_now.
void add_globals(Object& scope);

}  // namespace autoglm::jinja
