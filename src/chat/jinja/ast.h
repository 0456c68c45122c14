// Syntax tree of a parsed template.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "chat/jinja/value.h"

namespace autoglm::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    kLiteral,  // value
    kName,     // name
    kList,     // args
    kDict,     // args: key, value, key, value...
    kAttr,     // args[0].name
    kIndex,    // args[0][args[1]]
    kSlice,    // args[0][args[1]:args[2]:args[3]] (null parts allowed)
    kCall,     // args[0](args[1..], named)
    kFilter,   // name(args[0], args[1..], named)
    kTest,     // args[0] is [not] name(args[1..])
    kNot,      // not args[0]
    kNeg,      // -args[0]
    kBinary,   // args[0] op args[1]
    kCond,     // args[1] if args[0] else args[2]
  };
  Kind kind;
  Value value;
  std::string name;  // name, attribute, filter, test or operator
  bool negated = false;
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> named;
  explicit Expr(Kind k) : kind(k) {}
};

struct Node;
using Body = std::vector<std::unique_ptr<Node>>;

struct Node {
  enum class Kind { kText, kOutput, kIf, kFor, kSet, kSetBlock, kMacro, kBreak, kContinue, kFilterBlock };
  Kind kind;
  std::string text;  // kText
  ExprPtr expr;      // kOutput, kSet value, kFor iterable, kFilterBlock filter (args[0] empty)
  std::vector<std::pair<ExprPtr, Body>> branches;  // kIf: conditions and bodies (condition null: else)
  std::vector<std::string> targets;                // kFor loop names; kSet names (or namespace, attribute); kMacro name
  std::string attribute;                           // kSet/kSetBlock on "ns.attribute"
  ExprPtr filter;                                  // kFor "if" condition
  Body body, else_body;                            // kFor, kSetBlock, kMacro, kFilterBlock
  std::vector<std::pair<std::string, ExprPtr>> params;  // kMacro parameters and defaults (null: none)
  explicit Node(Kind k) : kind(k) {}
};

}  // namespace autoglm::jinja
