#include "chat/jinja/interpreter.h"

#include <cmath>

#include "chat/jinja/builtins.h"
#include "chat/jinja/limits.h"

namespace autoglm::jinja {
namespace {

struct BreakLoop {};
struct ContinueLoop {};

// Variables live in frames: the template's, and one per loop body or macro call.
class Scope {
 public:
  explicit Scope(const Scope* parent) : parent_(parent) {}
  const Value* find(const std::string& name) const {
    for (const Scope* s = this; s; s = s->parent_)
      if (const Value* v = s->vars.find(name)) return v;
    return nullptr;
  }
  Object vars;

 private:
  const Scope* parent_;
};

class Renderer {
 public:
  Renderer(const Object& variables, const RenderLimits& limits) : root_(nullptr), limits_(limits) {
    root_.vars = variables;
    add_globals(root_.vars);
  }

  std::string run(const Body& body) {
    std::string out;
    exec(body, root_, out);
    return out;
  }

 private:
  // One unit of work: every statement, expression and loop item, and per 4 KiB of strings or
  // item of lists that a call or filter returns.
  void step(int64_t units = 1) {
    const int64_t before = steps_;
    steps_ += units;
    if (steps_ > limits_.max_steps)
      throw Error("the template takes more than " + std::to_string(limits_.max_steps) +
                  " steps (limit template_steps)");
    const bool new_thousand = (before >> 10) != (steps_ >> 10);
    if (new_thousand && limits_.cancel && limits_.cancel->load(std::memory_order_relaxed))
      throw Error("rendering was cancelled (the server is stopping)");
  }

  Value charged(Value v) {
    if (v.is_string()) {
      check_string_size(v.as_string().size(), "a string");
      step(int64_t(v.as_string().size() / 4096));
    } else if (v.is_array()) {
      step(int64_t(v.as_array().size()));
    }
    return v;
  }

  Value eval(const Expr& e, Scope& s) {
    NestingGuard guard(depth_, limits_.max_depth, "statements, expressions and macro calls");
    step();
    switch (e.kind) {
      case Expr::Kind::kLiteral: return e.value;
      case Expr::Kind::kName: {
        const Value* v = s.find(e.name);
        return v ? *v : Value();
      }
      case Expr::Kind::kList: {
        Array a;
        for (const auto& x : e.args) a.push_back(eval(*x, s));
        return Value::array(std::move(a));
      }
      case Expr::Kind::kDict: {
        Object o;
        for (size_t i = 0; i + 1 < e.args.size(); i += 2) o.set(eval(*e.args[i], s).str(), eval(*e.args[i + 1], s));
        return Value::object(std::move(o));
      }
      case Expr::Kind::kAttr: return get_attribute(eval(*e.args[0], s), e.name);
      case Expr::Kind::kIndex: return index(eval(*e.args[0], s), eval(*e.args[1], s));
      case Expr::Kind::kSlice: return slice(e, s);
      case Expr::Kind::kCall: {
        const Value f = eval(*e.args[0], s);
        if (!f.is_function()) throw Error("'" + describe(*e.args[0]) + "' is not callable");
        return charged(f.as_function()(arguments(e, 1, s)));
      }
      case Expr::Kind::kFilter: return charged(run_filter(e.name, eval(*e.args[0], s), arguments(e, 1, s)));
      case Expr::Kind::kTest: {
        const bool r = run_test(e.name, eval(*e.args[0], s), arguments(e, 1, s));
        return Value(e.negated ? !r : r);
      }
      case Expr::Kind::kNot: return Value(!eval(*e.args[0], s).truthy());
      case Expr::Kind::kNeg: {
        const Value v = eval(*e.args[0], s);
        if (v.kind() == Value::Kind::kFloat) return Value(-v.as_float());
        if (v.is_number() || v.kind() == Value::Kind::kBool) return integer_result(-v.as_float(), "-");
        throw Error(std::string("cannot negate a ") + v.type_name());
      }
      case Expr::Kind::kCond: return eval(*e.args[0], s).truthy() ? eval(*e.args[1], s) : eval(*e.args[2], s);
      case Expr::Kind::kBinary: return binary(e, s);
    }
    return Value();
  }

  static std::string describe(const Expr& e) {
    if (e.kind == Expr::Kind::kName || e.kind == Expr::Kind::kAttr) return e.name;
    return "expression";
  }

  CallArgs arguments(const Expr& e, size_t first, Scope& s) {
    CallArgs a;
    for (size_t i = first; i < e.args.size(); ++i) a.positional.push_back(eval(*e.args[i], s));
    for (const auto& [name, x] : e.named) a.named.emplace_back(name, eval(*x, s));
    return a;
  }

  static Value index(const Value& target, const Value& key) {
    if (target.is_object()) {
      const Value* v = target.as_object().find(key.str());
      return v ? *v : Value();
    }
    if ((target.is_array() || target.is_string()) && key.is_number()) {
      const int64_t n = target.is_array() ? int64_t(target.as_array().size()) : int64_t(target.as_string().size());
      int64_t i = key.as_int();
      if (i < 0) i += n;
      if (i < 0 || i >= n) return Value();
      return target.is_array() ? target.as_array()[size_t(i)] : Value(target.as_string().substr(size_t(i), 1));
    }
    if (key.is_string()) return get_attribute(target, key.as_string());
    return Value();
  }

  Value slice(const Expr& e, Scope& s) {
    const Value target = eval(*e.args[0], s);
    auto part = [&](size_t i) { return e.args[i] ? eval(*e.args[i], s) : Value(); };
    const Value start = part(1), stop = part(2), step_v = part(3);
    const int64_t step = step_v.is_number() ? step_v.as_int() : 1;
    if (step == 0) throw Error("slice step cannot be zero");
    const int64_t n = target.is_array()    ? int64_t(target.as_array().size())
                      : target.is_string() ? int64_t(target.as_string().size())
                                           : throw Error(std::string("cannot slice a ") + target.type_name());
    auto clamp = [&](const Value& v, int64_t dflt) {
      if (!v.is_number()) return dflt;
      int64_t i = v.as_int();
      if (i < 0) i += n;
      return step > 0 ? std::clamp<int64_t>(i, 0, n) : std::clamp<int64_t>(i, -1, n - 1);
    };
    const int64_t b = clamp(start, step > 0 ? 0 : n - 1), end = clamp(stop, step > 0 ? n : -1);
    Array items;
    std::string chars;
    for (int64_t i = b; step > 0 ? i < end : i > end; i += step) {
      if (target.is_array())
        items.push_back(target.as_array()[size_t(i)]);
      else
        chars += target.as_string()[size_t(i)];
    }
    return target.is_array() ? Value::array(std::move(items)) : Value(chars);
  }

  Value binary(const Expr& e, Scope& s) {
    const std::string& op = e.name;
    if (op == "and") {
      Value a = eval(*e.args[0], s);
      return a.truthy() ? eval(*e.args[1], s) : a;
    }
    if (op == "or") {
      Value a = eval(*e.args[0], s);
      return a.truthy() ? a : eval(*e.args[1], s);
    }
    const Value a = eval(*e.args[0], s), b = eval(*e.args[1], s);
    if (op == "==") return Value(equal(a, b));
    if (op == "!=") return Value(!equal(a, b));
    if (op == "<") return Value(compare(a, b) < 0);
    if (op == ">") return Value(compare(a, b) > 0);
    if (op == "<=") return Value(compare(a, b) <= 0);
    if (op == ">=") return Value(compare(a, b) >= 0);
    if (op == "in") return Value(contains(b, a));
    if (op == "not in") return Value(!contains(b, a));
    if (op == "~") return charged(Value(a.str() + b.str()));
    if (op == "+") {
      if (a.is_string() && b.is_string()) {
        check_string_size(a.as_string().size() + b.as_string().size(), "+");
        return charged(Value(a.as_string() + b.as_string()));
      }
      if (a.is_array() && b.is_array()) {
        Array c = a.as_array();
        c.insert(c.end(), b.as_array().begin(), b.as_array().end());
        return charged(Value::array(std::move(c)));
      }
    }
    if (op == "*" && a.is_string() && b.is_number()) {
      const int64_t times = std::max<int64_t>(0, b.as_int());
      if (!a.as_string().empty() && uint64_t(times) > kMaxStringBytes / a.as_string().size())
        check_string_size(kMaxStringBytes + 1, "*");
      std::string r;
      for (int64_t i = 0; i < times; ++i) r += a.as_string();
      return charged(Value(r));
    }
    return arithmetic(op, a, b);
  }

  // An integer operation's result, refused when it leaves int64 (the templates' integers).
  static Value integer_result(double r, const std::string& op) {
    if (!(r >= -9223372036854775808.0 && r < 9223372036854775808.0))
      throw Error("the integer result of '" + op + "' is out of range");
    return Value(int64_t(r));
  }

  static Value arithmetic(const std::string& op, const Value& a, const Value& b) {
    auto numeric = [](const Value& v) { return v.is_number() || v.kind() == Value::Kind::kBool; };
    if (!numeric(a) || !numeric(b))
      throw Error("unsupported operand types for " + op + ": " + a.type_name() + " and " + b.type_name());
    const bool ints = a.kind() != Value::Kind::kFloat && b.kind() != Value::Kind::kFloat;
    const double x = a.as_float(), y = b.as_float();
    if (op == "/") {
      if (y == 0) throw Error("division by zero");
      return Value(x / y);
    }
    if (op == "//" || op == "%") {
      if (y == 0) throw Error("division by zero");
      const double q = std::floor(x / y);
      const double r = op == "//" ? q : x - q * y;
      return ints ? integer_result(r, op) : Value(r);
    }
    if (op == "**") return ints && y >= 0 ? integer_result(std::round(std::pow(x, y)), op) : Value(std::pow(x, y));
    const double r = op == "+" ? x + y : op == "-" ? x - y : x * y;
    return ints ? integer_result(r, op) : Value(r);
  }

  static bool contains(const Value& container, const Value& item) {
    if (container.is_string())
      return item.is_string() && container.as_string().find(item.as_string()) != std::string::npos;
    if (container.is_array()) {
      for (const auto& v : container.as_array())
        if (equal(v, item)) return true;
      return false;
    }
    if (container.is_object()) return container.as_object().find(item.str()) != nullptr;
    if (container.is_undefined() || container.is_none()) return false;
    throw Error(std::string("'in' needs a string, list or dict, not ") + container.type_name());
  }

  // ---- statements ----

  void exec(const Body& body, Scope& s, std::string& out) {
    for (const auto& n : body) exec_node(*n, s, out);
  }

  void exec_node(const Node& n, Scope& s, std::string& out) {
    NestingGuard guard(depth_, limits_.max_depth, "statements, expressions and macro calls");
    step();
    switch (n.kind) {
      case Node::Kind::kText: return append(out, n.text);
      case Node::Kind::kOutput: return append(out, eval(*n.expr, s).str());
      case Node::Kind::kIf:
        for (const auto& [cond, body] : n.branches)
          if (!cond || eval(*cond, s).truthy()) {
            exec(body, s, out);
            return;
          }
        return;
      case Node::Kind::kFor: return exec_for(n, s, out);
      case Node::Kind::kSet: return assign(n, eval(*n.expr, s), s);
      case Node::Kind::kSetBlock: {
        std::string captured;
        exec(n.body, s, captured);
        return assign(n, Value(captured), s);
      }
      case Node::Kind::kMacro: return define_macro(n, s);
      case Node::Kind::kBreak: throw BreakLoop{};
      case Node::Kind::kContinue: throw ContinueLoop{};
      case Node::Kind::kFilterBlock: {
        std::string captured;
        exec(n.body, s, captured);
        return append(out, charged(run_filter(n.expr->name, Value(captured), CallArgs{})).str());
      }
    }
  }

  void append(std::string& out, const std::string& text) const {
    check_string_size(out.size() + text.size(), "the output");
    if (out.size() + text.size() > limits_.max_output_bytes)
      throw Error("the output would exceed " + std::to_string(limits_.max_output_bytes) +
                  " bytes (limit template_output_bytes)");
    out += text;
  }

  void assign(const Node& n, const Value& v, Scope& s) {
    if (!n.attribute.empty()) {
      const Value* ns = s.find(n.targets[0]);
      if (!ns || !ns->is_object()) throw Error("cannot set attribute '" + n.attribute + "' of '" + n.targets[0] + "'");
      ns->as_object().set(n.attribute, v);
      return;
    }
    if (n.targets.size() == 1) return s.vars.set(n.targets[0], v);
    if (!v.is_array() || v.as_array().size() != n.targets.size()) throw Error("cannot unpack value in set");
    for (size_t i = 0; i < n.targets.size(); ++i) s.vars.set(n.targets[i], v.as_array()[i]);
  }

  void bind_targets(const Node& n, const Value& item, Scope& frame) {
    if (n.targets.size() == 1) return frame.vars.set(n.targets[0], item);
    if (!item.is_array() || item.as_array().size() != n.targets.size())
      throw Error("cannot unpack a loop item into " + std::to_string(n.targets.size()) + " names");
    for (size_t i = 0; i < n.targets.size(); ++i) frame.vars.set(n.targets[i], item.as_array()[i]);
  }

  void exec_for(const Node& n, Scope& s, std::string& out) {
    Array items = iterate(eval(*n.expr, s), "for");
    if (n.filter) {
      Array kept;
      for (const auto& item : items) {
        Scope probe(&s);
        bind_targets(n, item, probe);
        if (eval(*n.filter, probe).truthy()) kept.push_back(item);
      }
      items = std::move(kept);
    }
    if (items.empty()) {
      exec(n.else_body, s, out);
      return;
    }
    const int64_t len = int64_t(items.size());
    for (int64_t i = 0; i < len; ++i) {
      step();
      Scope frame(&s);
      bind_targets(n, items[size_t(i)], frame);
      Object loop;
      loop.set("index", Value(i + 1));
      loop.set("index0", Value(i));
      loop.set("revindex", Value(len - i));
      loop.set("revindex0", Value(len - i - 1));
      loop.set("first", Value(i == 0));
      loop.set("last", Value(i == len - 1));
      loop.set("length", Value(len));
      loop.set("previtem", i > 0 ? items[size_t(i - 1)] : Value());
      loop.set("nextitem", i + 1 < len ? items[size_t(i + 1)] : Value());
      frame.vars.set("loop", Value::object(std::move(loop)));
      try {
        exec(n.body, frame, out);
      } catch (const BreakLoop&) {
        break;
      } catch (const ContinueLoop&) {
      }
    }
  }

  void define_macro(const Node& n, Scope& s) {
    const Node* node = &n;
    s.vars.set(n.targets[0], Value::function([this, node](const CallArgs& args) {
                 Scope frame(&root_);
                 for (size_t i = 0; i < node->params.size(); ++i) {
                   const auto& [name, def] = node->params[i];
                   const Value* given = args.get(i, name.c_str());
                   frame.vars.set(name, given ? *given : def ? eval(*def, frame) : Value());
                 }
                 std::string out;
                 exec(node->body, frame, out);
                 return Value(out);
               }));
  }

  Scope root_;
  RenderLimits limits_;
  int depth_ = 0;
  int64_t steps_ = 0;
};

}  // namespace

std::string render(const Body& body, const Object& variables, const RenderLimits& limits) {
  try {
    return Renderer(variables, limits).run(body);
  } catch (const BreakLoop&) {  // the parser allows neither outside a loop; a last guard
    throw Error("'break' outside a for loop");
  } catch (const ContinueLoop&) {
    throw Error("'continue' outside a for loop");
  }
}

}  // namespace autoglm::jinja
