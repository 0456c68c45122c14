// A request's output constraint (JSON Schema, any JSON object, or GBNF) compiled to the
// grammar the sampler masks by; on its own so that request parsers (and their fuzz targets)
// can check a constraint without the rest of the runtime.
#include "autoglm/runtime.h"
#include "core/json_request.h"
#include "runtime/runtime_parts.h"
#include "sample/json_schema.h"

namespace autoglm {

Status compile_constraint(OutputConstraint& c, const RequestLimits& limits) {
  if (c.compiled || c.kind == ConstraintKind::kNone) return Status::ok();
  const std::string source = c.source.empty() ? "constraint" : c.source;
  std::string gbnf = c.text;
  if (c.kind == ConstraintKind::kJsonObject) gbnf = json_object_gbnf();
  if (c.kind == ConstraintKind::kJsonSchema) {
    auto schema = parse_json_request(c.text, limits.json_depth, limits.json_object_keys);
    if (!schema) return Status(StatusCode::kInvalidArgument, schema.status().message(), source);
    auto converted = json_schema_to_gbnf(nlohmann::json(*schema));
    if (!converted) return Status(StatusCode::kInvalidArgument, converted.status().message(), source);
    gbnf = *converted;
  }
  auto grammar = Grammar::parse(gbnf, GrammarLimits::of(limits));
  if (!grammar) return Status(StatusCode::kInvalidArgument, grammar.status().message(), source);
  c.compiled = *grammar;
  return Status::ok();
}

Result<std::shared_ptr<const Grammar>> constraint_grammar(const OutputConstraint& constraint,
                                                          const RequestLimits& limits) {
  OutputConstraint c = constraint;
  if (Status st = compile_constraint(c, limits); !st.is_ok())
    return Status(st.code(), st.field() + ": " + st.message(), st.field());
  return c.compiled;
}

}  // namespace autoglm
