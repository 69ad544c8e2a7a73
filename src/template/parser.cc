#include "template/parser.h"

#include <charconv>
#include <cmath>
#include <initializer_list>
#include <string_view>

namespace kvs::tmpl {
namespace {

// Tests that take one argument may be written `x is divisibleby 3`.
bool TestTakesArgument(std::string_view name) {
  for (std::string_view t : {"divisibleby", "eq", "equalto", "ne", "sameas", "gt", "ge", "lt", "le",
                             "greaterthan", "lessthan", "in"}) {
    if (t == name) return true;
  }
  return false;
}

class Parser {
 public:
  Parser(std::vector<Token> tokens, const SourceMap& map) : t_(std::move(tokens)), map_(map) {}

  StatusOr<std::unique_ptr<Program>> Run() {
    auto program = std::make_unique<Program>();
    while (i_ < t_.size()) {
      KVS_ASSIGN_OR_RETURN(StmtPtr s, ParseAny());
      if (s) program->body.push_back(std::move(s));
    }
    return program;
  }

 private:
  // ---- token helpers ----
  const Token* Peek(size_t k = 0) const { return i_ + k < t_.size() ? &t_[i_ + k] : nullptr; }
  bool Is(Tok type, size_t k = 0) const {
    const Token* t = Peek(k);
    return t && t->type == type;
  }
  bool IsIdent(std::string_view name, size_t k = 0) const {
    const Token* t = Peek(k);
    return t && t->type == Tok::kIdent && t->value == name;
  }
  // `{% name` for any of names.
  bool IsStatement(std::initializer_list<std::string_view> names) const {
    if (!Is(Tok::kOpenStmt) || !Is(Tok::kIdent, 1)) return false;
    for (std::string_view n : names) {
      if (t_[i_ + 1].value == n) return true;
    }
    return false;
  }
  uint32_t Pos() const { return i_ < t_.size() ? t_[i_].pos : static_cast<uint32_t>(map_.source().size()); }
  Status Error(uint32_t pos, const std::string& what) const {
    return InvalidArgument("template syntax error at {}: {}", map_.Describe(pos), what);
  }
  std::string Describe(const Token* t) const {
    if (!t) return "end of template";
    if (t->type == Tok::kIdent || t->type == Tok::kNumber || t->type == Tok::kAdditive ||
        t->type == Tok::kMultiplicative || t->type == Tok::kCompare || t->type == Tok::kUnary) {
      return fmt::format("'{}'", t->value);
    }
    if (t->type == Tok::kString) return "string literal";
    return TokName(t->type);
  }
  Status Expect(Tok type, const char* context) {
    if (!Is(type)) {
      return Error(Pos(), fmt::format("expected {} {}, found {}", TokName(type), context, Describe(Peek())));
    }
    ++i_;
    return Status::Ok();
  }
  Status ExpectIdent(std::string_view name) {
    if (!IsIdent(name)) return Error(Pos(), fmt::format("expected '{}', found {}", name, Describe(Peek())));
    ++i_;
    return Status::Ok();
  }

  struct DepthGuard {
    explicit DepthGuard(int* d) : d_(d) { ++*d_; }
    ~DepthGuard() { --*d_; }
    int* d_;
  };
  Status CheckDepth() const {
    if (depth_ > kMaxParseDepth) return Error(Pos(), fmt::format("nesting deeper than {} levels", kMaxParseDepth));
    return Status::Ok();
  }

  // ---- statements ----
  StatusOr<StmtPtr> ParseAny();
  StatusOr<StmtPtr> ParseStatement();
  // Parses statements until `{% <one of ends>`; error if the template ends first.
  Status ParseBody(Body* body, std::initializer_list<std::string_view> ends, std::string_view opener, uint32_t pos);
  StatusOr<StmtPtr> ParseIf(uint32_t pos);
  StatusOr<StmtPtr> ParseFor(uint32_t pos);
  StatusOr<StmtPtr> ParseSet(uint32_t pos);
  StatusOr<StmtPtr> ParseMacro(uint32_t pos);
  StatusOr<StmtPtr> ParseCallBlock(uint32_t pos);
  StatusOr<StmtPtr> ParseFilterBlock(uint32_t pos);
  Status ExpectEnd(std::string_view name);

  // ---- expressions ----
  StatusOr<ExprPtr> ParseExpression();
  StatusOr<ExprPtr> ParseSequence(bool primary);
  StatusOr<ExprPtr> ParseOr();
  StatusOr<ExprPtr> ParseAnd();
  StatusOr<ExprPtr> ParseNot();
  StatusOr<ExprPtr> ParseComparison();
  StatusOr<ExprPtr> ParseAdditive();
  StatusOr<ExprPtr> ParseMultiplicative();
  StatusOr<ExprPtr> ParsePower();
  StatusOr<ExprPtr> ParseTest();
  StatusOr<ExprPtr> ParseFilter();
  StatusOr<ExprPtr> ParseUnarySign();
  StatusOr<ExprPtr> ParseCallMember();
  StatusOr<ExprPtr> ParseMember(ExprPtr object);
  StatusOr<ExprPtr> ParsePrimary();
  Status ParseArgs(std::vector<Arg>* args, bool parameters);
  StatusOr<ExprPtr> ParseFilterCall(ExprPtr operand, uint32_t pos);

  std::vector<Token> t_;
  const SourceMap& map_;
  size_t i_ = 0;
  int depth_ = 0;
  int loop_depth_ = 0;  // enclosing for loops within the current macro
};

StatusOr<StmtPtr> Parser::ParseAny() {
  const Token& t = t_[i_];
  switch (t.type) {
    case Tok::kComment: ++i_; return StmtPtr();
    case Tok::kText: {
      auto s = std::make_unique<Stmt>(StmtKind::kText, t.pos);
      s->text = std::make_shared<const std::string>(t.value);
      ++i_;
      return s;
    }
    case Tok::kOpenStmt: return ParseStatement();
    case Tok::kOpenExpr: {
      auto s = std::make_unique<Stmt>(StmtKind::kOutput, t.pos);
      ++i_;
      KVS_ASSIGN_OR_RETURN(s->expr, ParseExpression());
      KVS_RETURN_IF_ERROR(Expect(Tok::kCloseExpr, "to close '{{'"));
      return s;
    }
    default: return Error(t.pos, fmt::format("unexpected {}", Describe(&t)));
  }
}

Status Parser::ParseBody(Body* body, std::initializer_list<std::string_view> ends, std::string_view opener,
                         uint32_t pos) {
  while (!IsStatement(ends)) {
    if (i_ >= t_.size()) {
      return Error(pos, fmt::format("'{}' block is never closed (expected '{{% {} %}}')", opener, *ends.begin()));
    }
    KVS_ASSIGN_OR_RETURN(StmtPtr s, ParseAny());
    if (s) body->push_back(std::move(s));
  }
  return Status::Ok();
}

Status Parser::ExpectEnd(std::string_view name) {
  KVS_RETURN_IF_ERROR(Expect(Tok::kOpenStmt, "before an end tag"));
  KVS_RETURN_IF_ERROR(ExpectIdent(name));
  return Expect(Tok::kCloseStmt, fmt::format("after '{}'", name).c_str());
}

StatusOr<StmtPtr> Parser::ParseStatement() {
  const uint32_t pos = Pos();
  ++i_;  // {%
  DepthGuard guard(&depth_);
  KVS_RETURN_IF_ERROR(CheckDepth());
  if (!Is(Tok::kIdent)) return Error(Pos(), fmt::format("expected a statement name, found {}", Describe(Peek())));
  const std::string name = t_[i_].value;
  const uint32_t name_pos = Pos();
  ++i_;
  if (name == "set") return ParseSet(pos);
  if (name == "if") {
    KVS_ASSIGN_OR_RETURN(StmtPtr s, ParseIf(pos));
    KVS_RETURN_IF_ERROR(ExpectEnd("endif"));
    return s;
  }
  if (name == "for") return ParseFor(pos);
  if (name == "macro") return ParseMacro(pos);
  if (name == "call") return ParseCallBlock(pos);
  if (name == "filter") return ParseFilterBlock(pos);
  if (name == "break" || name == "continue") {
    if (loop_depth_ == 0) return Error(name_pos, fmt::format("'{}' outside of a for loop", name));
    KVS_RETURN_IF_ERROR(Expect(Tok::kCloseStmt, fmt::format("after '{}'", name).c_str()));
    return std::make_unique<Stmt>(name == "break" ? StmtKind::kBreak : StmtKind::kContinue, pos);
  }
  for (std::string_view end : {"endif", "endfor", "endset", "endmacro", "endcall", "endfilter", "elif", "else",
                               "endraw"}) {
    if (name == end) return Error(name_pos, fmt::format("unexpected '{}' without a matching opening tag", name));
  }
  return Error(name_pos, fmt::format("unsupported statement '{}'", name));
}

StatusOr<StmtPtr> Parser::ParseIf(uint32_t pos) {
  auto s = std::make_unique<Stmt>(StmtKind::kIf, pos);
  KVS_ASSIGN_OR_RETURN(s->expr, ParseExpression());
  KVS_RETURN_IF_ERROR(Expect(Tok::kCloseStmt, "after the if condition"));
  KVS_RETURN_IF_ERROR(ParseBody(&s->body, {"endif", "elif", "else"}, "if", pos));
  if (IsStatement({"elif"})) {
    const uint32_t elif_pos = Pos();
    i_ += 2;
    DepthGuard guard(&depth_);
    KVS_RETURN_IF_ERROR(CheckDepth());
    KVS_ASSIGN_OR_RETURN(StmtPtr nested, ParseIf(elif_pos));
    s->alt.push_back(std::move(nested));
  } else if (IsStatement({"else"})) {
    i_ += 2;
    KVS_RETURN_IF_ERROR(Expect(Tok::kCloseStmt, "after 'else'"));
    KVS_RETURN_IF_ERROR(ParseBody(&s->alt, {"endif"}, "if", pos));
  }
  return s;
}

StatusOr<StmtPtr> Parser::ParseFor(uint32_t pos) {
  auto s = std::make_unique<Stmt>(StmtKind::kFor, pos);
  KVS_ASSIGN_OR_RETURN(s->target, ParseSequence(/*primary=*/true));
  auto is_name = [](const Expr& e) { return e.kind == ExprKind::kName; };
  bool ok = is_name(*s->target);
  if (s->target->kind == ExprKind::kTuple) {
    ok = true;
    for (const auto& item : s->target->items) ok = ok && is_name(*item);
  }
  if (!ok) return Error(s->target->pos, "expected a name or a tuple of names as the loop variable");
  if (!IsIdent("in")) return Error(Pos(), fmt::format("expected 'in' after the loop variable, found {}", Describe(Peek())));
  ++i_;
  KVS_ASSIGN_OR_RETURN(ExprPtr iterable, ParseExpression());
  if (iterable->kind == ExprKind::kSelect) {
    s->cond = std::move(iterable->a);
    s->expr = std::move(iterable->b);
  } else {
    s->expr = std::move(iterable);
  }
  if (IsIdent("recursive")) return Error(Pos(), "unsupported construct 'recursive' for loops");
  KVS_RETURN_IF_ERROR(Expect(Tok::kCloseStmt, "after the for loop header"));
  ++loop_depth_;
  Status st = ParseBody(&s->body, {"endfor", "else"}, "for", pos);
  --loop_depth_;
  KVS_RETURN_IF_ERROR(st);
  if (IsStatement({"else"})) {
    i_ += 2;
    KVS_RETURN_IF_ERROR(Expect(Tok::kCloseStmt, "after 'else'"));
    KVS_RETURN_IF_ERROR(ParseBody(&s->alt, {"endfor"}, "for", pos));
  }
  KVS_RETURN_IF_ERROR(ExpectEnd("endfor"));
  return s;
}

StatusOr<StmtPtr> Parser::ParseSet(uint32_t pos) {
  auto s = std::make_unique<Stmt>(StmtKind::kSet, pos);
  KVS_ASSIGN_OR_RETURN(s->target, ParseSequence(false));
  const Expr& t = *s->target;
  bool ok = t.kind == ExprKind::kName || (t.kind == ExprKind::kMember && !t.name.empty() && !t.items.size());
  if (t.kind == ExprKind::kTuple) {
    ok = true;
    for (const auto& item : t.items) ok = ok && item->kind == ExprKind::kName;
  }
  if (!ok) return Error(t.pos, "can only assign to a name, a tuple of names or a namespace attribute");
  if (Is(Tok::kEquals)) {
    ++i_;
    KVS_ASSIGN_OR_RETURN(s->expr, ParseSequence(false));
    KVS_RETURN_IF_ERROR(Expect(Tok::kCloseStmt, "after the set statement"));
    return s;
  }
  KVS_RETURN_IF_ERROR(Expect(Tok::kCloseStmt, "after the set target"));
  KVS_RETURN_IF_ERROR(ParseBody(&s->body, {"endset"}, "set", pos));
  KVS_RETURN_IF_ERROR(ExpectEnd("endset"));
  return s;
}

// Which of the special names caller/kwargs/varargs a macro body reads.
void FindSpecialNames(const Expr* e, Stmt* macro);
void FindSpecialNames(const Body& body, Stmt* macro) {
  for (const auto& s : body) {
    FindSpecialNames(s->expr.get(), macro);
    FindSpecialNames(s->cond.get(), macro);
    FindSpecialNames(s->target.get(), macro);
    for (const Arg& a : s->params) FindSpecialNames(a.value.get(), macro);
    FindSpecialNames(s->body, macro);
    FindSpecialNames(s->alt, macro);
  }
}
void FindSpecialNames(const Expr* e, Stmt* macro) {
  if (!e) return;
  if (e->kind == ExprKind::kName) {
    if (e->name == "caller") macro->uses_caller = true;
    if (e->name == "kwargs") macro->uses_kwargs = true;
    if (e->name == "varargs") macro->uses_varargs = true;
  }
  FindSpecialNames(e->a.get(), macro);
  FindSpecialNames(e->b.get(), macro);
  FindSpecialNames(e->c.get(), macro);
  for (const auto& x : e->items) FindSpecialNames(x.get(), macro);
  for (const auto& x : e->keys) FindSpecialNames(x.get(), macro);
  for (const auto& a : e->args) FindSpecialNames(a.value.get(), macro);
}

void MarkSpecialNames(Stmt* s) {
  FindSpecialNames(s->body, s);
  for (const Arg& a : s->params) {
    FindSpecialNames(a.value.get(), s);
    if (a.name == "caller") s->uses_caller = false;
    if (a.name == "kwargs") s->uses_kwargs = false;
    if (a.name == "varargs") s->uses_varargs = false;
  }
}

StatusOr<StmtPtr> Parser::ParseMacro(uint32_t pos) {
  auto s = std::make_unique<Stmt>(StmtKind::kMacro, pos);
  if (!Is(Tok::kIdent)) return Error(Pos(), fmt::format("expected a macro name, found {}", Describe(Peek())));
  s->name = t_[i_++].value;
  KVS_RETURN_IF_ERROR(ParseArgs(&s->params, /*parameters=*/true));
  KVS_RETURN_IF_ERROR(Expect(Tok::kCloseStmt, "after the macro signature"));
  const int saved_loops = loop_depth_;
  loop_depth_ = 0;
  Status st = ParseBody(&s->body, {"endmacro"}, "macro", pos);
  loop_depth_ = saved_loops;
  KVS_RETURN_IF_ERROR(st);
  KVS_RETURN_IF_ERROR(ExpectEnd("endmacro"));
  MarkSpecialNames(s.get());
  return s;
}

StatusOr<StmtPtr> Parser::ParseCallBlock(uint32_t pos) {
  auto s = std::make_unique<Stmt>(StmtKind::kCallBlock, pos);
  if (Is(Tok::kLParen)) KVS_RETURN_IF_ERROR(ParseArgs(&s->params, /*parameters=*/true));
  if (!Is(Tok::kIdent)) return Error(Pos(), "expected a macro name after 'call'");
  auto callee = std::make_unique<Expr>(ExprKind::kName, Pos());
  callee->name = t_[i_++].value;
  auto call = std::make_unique<Expr>(ExprKind::kCall, callee->pos);
  call->a = std::move(callee);
  KVS_RETURN_IF_ERROR(ParseArgs(&call->args, /*parameters=*/false));
  s->expr = std::move(call);
  KVS_RETURN_IF_ERROR(Expect(Tok::kCloseStmt, "after the call block header"));
  const int saved_loops = loop_depth_;
  loop_depth_ = 0;
  Status st = ParseBody(&s->body, {"endcall"}, "call", pos);
  loop_depth_ = saved_loops;
  KVS_RETURN_IF_ERROR(st);
  KVS_RETURN_IF_ERROR(ExpectEnd("endcall"));
  MarkSpecialNames(s.get());
  return s;
}

StatusOr<StmtPtr> Parser::ParseFilterBlock(uint32_t pos) {
  auto s = std::make_unique<Stmt>(StmtKind::kFilterBlock, pos);
  if (!Is(Tok::kIdent)) return Error(Pos(), "expected a filter name after 'filter'");
  KVS_ASSIGN_OR_RETURN(s->expr, ParseFilterCall(nullptr, Pos()));
  while (Is(Tok::kPipe)) {
    ++i_;
    KVS_ASSIGN_OR_RETURN(s->expr, ParseFilterCall(std::move(s->expr), Pos()));
  }
  KVS_RETURN_IF_ERROR(Expect(Tok::kCloseStmt, "after the filter block header"));
  KVS_RETURN_IF_ERROR(ParseBody(&s->body, {"endfilter"}, "filter", pos));
  KVS_RETURN_IF_ERROR(ExpectEnd("endfilter"));
  return s;
}

// ---- expressions ----

StatusOr<ExprPtr> Parser::ParseExpression() {
  DepthGuard guard(&depth_);
  KVS_RETURN_IF_ERROR(CheckDepth());
  const uint32_t pos = Pos();
  KVS_ASSIGN_OR_RETURN(ExprPtr a, ParseOr());
  if (!IsIdent("if")) return a;
  ++i_;
  KVS_ASSIGN_OR_RETURN(ExprPtr test, ParseOr());
  if (IsIdent("else")) {
    ++i_;
    auto e = std::make_unique<Expr>(ExprKind::kTernary, pos);
    KVS_ASSIGN_OR_RETURN(e->c, ParseExpression());
    e->a = std::move(test);
    e->b = std::move(a);
    return e;
  }
  auto e = std::make_unique<Expr>(ExprKind::kSelect, pos);
  e->a = std::move(test);
  e->b = std::move(a);
  return e;
}

StatusOr<ExprPtr> Parser::ParseSequence(bool primary) {
  const uint32_t pos = Pos();
  auto parse_one = [&]() { return primary ? ParsePrimary() : ParseExpression(); };
  KVS_ASSIGN_OR_RETURN(ExprPtr first, parse_one());
  if (!Is(Tok::kComma)) return first;
  auto tuple = std::make_unique<Expr>(ExprKind::kTuple, pos);
  tuple->items.push_back(std::move(first));
  while (Is(Tok::kComma)) {
    ++i_;
    KVS_ASSIGN_OR_RETURN(ExprPtr next, parse_one());
    tuple->items.push_back(std::move(next));
  }
  return tuple;
}

namespace {
ExprPtr MakeBinary(BinOp op, uint32_t pos, ExprPtr a, ExprPtr b) {
  auto e = std::make_unique<Expr>(ExprKind::kBinary, pos);
  e->op = op;
  e->a = std::move(a);
  e->b = std::move(b);
  return e;
}
}  // namespace

StatusOr<ExprPtr> Parser::ParseOr() {
  KVS_ASSIGN_OR_RETURN(ExprPtr left, ParseAnd());
  while (IsIdent("or")) {
    const uint32_t pos = Pos();
    ++i_;
    KVS_ASSIGN_OR_RETURN(ExprPtr right, ParseAnd());
    left = MakeBinary(BinOp::kOr, pos, std::move(left), std::move(right));
  }
  return left;
}

StatusOr<ExprPtr> Parser::ParseAnd() {
  KVS_ASSIGN_OR_RETURN(ExprPtr left, ParseNot());
  while (IsIdent("and")) {
    const uint32_t pos = Pos();
    ++i_;
    KVS_ASSIGN_OR_RETURN(ExprPtr right, ParseNot());
    left = MakeBinary(BinOp::kAnd, pos, std::move(left), std::move(right));
  }
  return left;
}

StatusOr<ExprPtr> Parser::ParseNot() {
  if (!IsIdent("not")) return ParseComparison();
  DepthGuard guard(&depth_);
  KVS_RETURN_IF_ERROR(CheckDepth());
  auto e = std::make_unique<Expr>(ExprKind::kUnary, Pos());
  ++i_;
  e->unary_op = "not";
  KVS_ASSIGN_OR_RETURN(e->a, ParseNot());
  return e;
}

StatusOr<ExprPtr> Parser::ParseComparison() {
  KVS_ASSIGN_OR_RETURN(ExprPtr left, ParseAdditive());
  while (true) {
    const uint32_t pos = Pos();
    BinOp op;
    if (IsIdent("not") && IsIdent("in", 1)) {
      op = BinOp::kNotIn;
      i_ += 2;
    } else if (IsIdent("in")) {
      op = BinOp::kIn;
      ++i_;
    } else if (Is(Tok::kCompare)) {
      const std::string& v = t_[i_++].value;
      op = v == "==" ? BinOp::kEq : v == "!=" ? BinOp::kNe : v == "<" ? BinOp::kLt : v == ">" ? BinOp::kGt
         : v == "<=" ? BinOp::kLe : BinOp::kGe;
    } else {
      break;
    }
    KVS_ASSIGN_OR_RETURN(ExprPtr right, ParseAdditive());
    left = MakeBinary(op, pos, std::move(left), std::move(right));
  }
  return left;
}

StatusOr<ExprPtr> Parser::ParseAdditive() {
  KVS_ASSIGN_OR_RETURN(ExprPtr left, ParseMultiplicative());
  while (Is(Tok::kAdditive)) {
    const uint32_t pos = Pos();
    const std::string& v = t_[i_++].value;
    const BinOp op = v == "+" ? BinOp::kAdd : v == "-" ? BinOp::kSub : BinOp::kConcat;
    KVS_ASSIGN_OR_RETURN(ExprPtr right, ParseMultiplicative());
    left = MakeBinary(op, pos, std::move(left), std::move(right));
  }
  return left;
}

StatusOr<ExprPtr> Parser::ParseMultiplicative() {
  KVS_ASSIGN_OR_RETURN(ExprPtr left, ParsePower());
  while (Is(Tok::kMultiplicative)) {
    const uint32_t pos = Pos();
    const std::string& v = t_[i_++].value;
    const BinOp op = v == "*" ? BinOp::kMul : v == "/" ? BinOp::kDiv : v == "//" ? BinOp::kFloorDiv : BinOp::kMod;
    KVS_ASSIGN_OR_RETURN(ExprPtr right, ParsePower());
    left = MakeBinary(op, pos, std::move(left), std::move(right));
  }
  return left;
}

StatusOr<ExprPtr> Parser::ParsePower() {
  KVS_ASSIGN_OR_RETURN(ExprPtr left, ParseTest());
  while (Is(Tok::kPower)) {
    const uint32_t pos = Pos();
    ++i_;
    KVS_ASSIGN_OR_RETURN(ExprPtr right, ParseTest());
    left = MakeBinary(BinOp::kPow, pos, std::move(left), std::move(right));
  }
  return left;
}

StatusOr<ExprPtr> Parser::ParseTest() {
  KVS_ASSIGN_OR_RETURN(ExprPtr operand, ParseFilter());
  while (IsIdent("is")) {
    const uint32_t pos = Pos();
    ++i_;
    auto e = std::make_unique<Expr>(ExprKind::kTest, pos);
    if (IsIdent("not")) {
      e->negate = true;
      ++i_;
    }
    if (!Is(Tok::kIdent)) return Error(Pos(), fmt::format("expected a test name after 'is', found {}", Describe(Peek())));
    e->name = t_[i_++].value;
    if (Is(Tok::kLParen)) {
      e->has_call = true;
      KVS_RETURN_IF_ERROR(ParseArgs(&e->args, false));
    } else if (TestTakesArgument(e->name) &&
               (Is(Tok::kNumber) || Is(Tok::kString) || Is(Tok::kLBracket) || Is(Tok::kLBrace) ||
                (Is(Tok::kIdent) && !IsIdent("and") && !IsIdent("or") && !IsIdent("else") && !IsIdent("if")))) {
      e->has_call = true;
      Arg arg;
      KVS_ASSIGN_OR_RETURN(ExprPtr primary, ParsePrimary());
      KVS_ASSIGN_OR_RETURN(arg.value, ParseMember(std::move(primary)));
      e->args.push_back(std::move(arg));
    }
    e->a = std::move(operand);
    operand = std::move(e);
  }
  return operand;
}

StatusOr<ExprPtr> Parser::ParseFilterCall(ExprPtr operand, uint32_t pos) {
  if (!Is(Tok::kIdent)) return Error(Pos(), fmt::format("expected a filter name, found {}", Describe(Peek())));
  auto e = std::make_unique<Expr>(ExprKind::kFilter, pos);
  e->name = t_[i_++].value;
  if (Is(Tok::kLParen)) {
    e->has_call = true;
    KVS_RETURN_IF_ERROR(ParseArgs(&e->args, false));
  }
  e->a = std::move(operand);
  return e;
}

StatusOr<ExprPtr> Parser::ParseFilter() {
  KVS_ASSIGN_OR_RETURN(ExprPtr operand, ParseUnarySign());
  while (Is(Tok::kPipe)) {
    const uint32_t pos = Pos();
    ++i_;
    KVS_ASSIGN_OR_RETURN(operand, ParseFilterCall(std::move(operand), pos));
  }
  return operand;
}

StatusOr<ExprPtr> Parser::ParseUnarySign() {
  const Token* t = Peek();
  if (t && (t->type == Tok::kUnary || t->type == Tok::kAdditive) && (t->value == "-" || t->value == "+")) {
    DepthGuard guard(&depth_);
    KVS_RETURN_IF_ERROR(CheckDepth());
    auto e = std::make_unique<Expr>(ExprKind::kUnary, t->pos);
    e->unary_op = t->value;
    ++i_;
    KVS_ASSIGN_OR_RETURN(e->a, ParseUnarySign());
    return e;
  }
  return ParseCallMember();
}

StatusOr<ExprPtr> Parser::ParseCallMember() {
  KVS_ASSIGN_OR_RETURN(ExprPtr primary, ParsePrimary());
  KVS_ASSIGN_OR_RETURN(ExprPtr e, ParseMember(std::move(primary)));
  while (Is(Tok::kLParen)) {
    auto call = std::make_unique<Expr>(ExprKind::kCall, e->pos);
    call->a = std::move(e);
    KVS_RETURN_IF_ERROR(ParseArgs(&call->args, false));
    KVS_ASSIGN_OR_RETURN(e, ParseMember(std::move(call)));
  }
  return e;
}

StatusOr<ExprPtr> Parser::ParseMember(ExprPtr object) {
  while (Is(Tok::kDot) || Is(Tok::kLBracket)) {
    const uint32_t pos = Pos();
    const bool computed = Is(Tok::kLBracket);
    ++i_;
    if (!computed) {
      auto e = std::make_unique<Expr>(ExprKind::kMember, pos);
      if (Is(Tok::kIdent)) {
        e->name = t_[i_++].value;
      } else if (Is(Tok::kNumber) && t_[i_].value.find('.') == std::string::npos && t_[i_].value[0] != '-' &&
                 t_[i_].value[0] != '+') {
        // `x.0` indexes like x[0].
        auto idx = std::make_unique<Expr>(ExprKind::kLiteral, Pos());
        int64_t n = 0;
        const std::string& v = t_[i_++].value;
        std::from_chars(v.data(), v.data() + v.size(), n);
        idx->value = Value::Int(n);
        e->items.push_back(std::move(idx));
      } else {
        return Error(Pos(), fmt::format("expected an attribute name after '.', found {}", Describe(Peek())));
      }
      e->a = std::move(object);
      object = std::move(e);
      continue;
    }
    // [index] or [start:stop:step]
    std::vector<ExprPtr> parts;
    bool is_slice = false;
    while (!Is(Tok::kRBracket)) {
      if (i_ >= t_.size()) return Error(pos, "unclosed '['");
      if (Is(Tok::kColon)) {
        parts.push_back(nullptr);
        ++i_;
        is_slice = true;
      } else {
        KVS_ASSIGN_OR_RETURN(ExprPtr p, ParseExpression());
        parts.push_back(std::move(p));
        if (Is(Tok::kColon)) {
          ++i_;
          is_slice = true;
        } else if (!Is(Tok::kRBracket)) {
          return Error(Pos(), fmt::format("expected ']' or ':' in a subscript, found {}", Describe(Peek())));
        }
      }
    }
    ++i_;  // ]
    if (parts.empty()) return Error(pos, "empty subscript '[]'");
    if (is_slice) {
      if (parts.size() > 3) return Error(pos, "a slice takes at most 3 parts");
      parts.resize(3);
      auto e = std::make_unique<Expr>(ExprKind::kSlice, pos);
      e->items = std::move(parts);
      e->a = std::move(object);
      object = std::move(e);
    } else {
      auto e = std::make_unique<Expr>(ExprKind::kMember, pos);
      e->items.push_back(std::move(parts[0]));
      e->a = std::move(object);
      object = std::move(e);
    }
  }
  return object;
}

Status Parser::ParseArgs(std::vector<Arg>* args, bool parameters) {
  const uint32_t open_pos = Pos();
  KVS_RETURN_IF_ERROR(Expect(Tok::kLParen, "to open an argument list"));
  bool saw_keyword = false, saw_spread = false;
  while (!Is(Tok::kRParen)) {
    if (i_ >= t_.size()) return Error(open_pos, "unclosed '('");
    const uint32_t pos = Pos();
    const bool kw_spread = Is(Tok::kPower);
    const bool spread = Is(Tok::kMultiplicative) && t_[i_].value == "*";
    if (parameters && (kw_spread || spread)) return Error(pos, "argument unpacking in a parameter list");
    Arg arg;
    if (kw_spread) {
      ++i_;
      arg.kind = Arg::Kind::kKwSpread;
      KVS_ASSIGN_OR_RETURN(arg.value, ParseExpression());
      args->push_back(std::move(arg));
      if (Is(Tok::kComma)) ++i_;
      if (!Is(Tok::kRParen)) return Error(Pos(), "'**' must be the last argument");
      break;
    }
    if (spread) {
      if (saw_spread) return Error(pos, "only one '*' argument is allowed");
      saw_spread = true;
      ++i_;
      arg.kind = Arg::Kind::kSpread;
      KVS_ASSIGN_OR_RETURN(arg.value, ParseExpression());
    } else {
      KVS_ASSIGN_OR_RETURN(ExprPtr e, ParseExpression());
      if (Is(Tok::kEquals)) {
        ++i_;
        if (e->kind != ExprKind::kName) return Error(e->pos, "expected a name before '='");
        arg.kind = Arg::Kind::kKeyword;
        arg.name = e->name;
        KVS_ASSIGN_OR_RETURN(arg.value, ParseExpression());
        saw_keyword = true;
      } else if (parameters) {
        if (e->kind != ExprKind::kName) return Error(e->pos, "expected a parameter name");
        if (saw_keyword) return Error(e->pos, "a parameter without a default follows one with a default");
        arg.name = e->name;
      } else {
        if (saw_keyword) return Error(e->pos, "a positional argument follows a keyword argument");
        arg.value = std::move(e);
      }
      if (parameters) {
        for (const Arg& prev : *args) {
          if (prev.name == arg.name) return Error(pos, fmt::format("duplicate parameter '{}'", arg.name));
        }
      }
    }
    args->push_back(std::move(arg));
    if (Is(Tok::kComma)) {
      ++i_;
    } else if (!Is(Tok::kRParen)) {
      return Error(Pos(), fmt::format("expected ',' or ')' in an argument list, found {}", Describe(Peek())));
    }
  }
  ++i_;  // )
  return Status::Ok();
}

StatusOr<ExprPtr> Parser::ParsePrimary() {
  const Token* t = Peek();
  if (!t) return Error(Pos(), "unexpected end of template in an expression");
  const uint32_t pos = t->pos;
  switch (t->type) {
    case Tok::kNumber: {
      auto e = std::make_unique<Expr>(ExprKind::kLiteral, pos);
      const std::string& v = t->value;
      const bool negative = v[0] == '-';
      const size_t skip = (v[0] == '-' || v[0] == '+') ? 1 : 0;
      const char* b = v.data() + skip;
      const char* end = v.data() + v.size();
      if (v.find('.') != std::string::npos) {
        double d = 0;
        std::from_chars(b, end, d);
        e->value = Value::Float(negative ? -d : d);
      } else {
        int64_t n = 0;
        auto r = std::from_chars(b, end, n);
        if (r.ec == std::errc()) {
          e->value = Value::Int(negative ? -n : n);
        } else {
          double d = 0;
          std::from_chars(b, end, d);
          e->value = Value::Float(negative ? -d : d);
        }
      }
      ++i_;
      return e;
    }
    case Tok::kString: {
      std::string s = t->value;
      ++i_;
      while (Is(Tok::kString)) s += t_[i_++].value;
      auto e = std::make_unique<Expr>(ExprKind::kLiteral, pos);
      e->value = Value::String(std::move(s));
      return e;
    }
    case Tok::kIdent: {
      auto e = std::make_unique<Expr>(ExprKind::kName, pos);
      e->name = t->value;
      ++i_;
      return e;
    }
    case Tok::kLParen: {
      ++i_;
      KVS_ASSIGN_OR_RETURN(ExprPtr e, ParseSequence(false));
      KVS_RETURN_IF_ERROR(Expect(Tok::kRParen, "to close '('"));
      return e;
    }
    case Tok::kLBracket: {
      ++i_;
      auto e = std::make_unique<Expr>(ExprKind::kList, pos);
      while (!Is(Tok::kRBracket)) {
        if (i_ >= t_.size()) return Error(pos, "unclosed '['");
        KVS_ASSIGN_OR_RETURN(ExprPtr item, ParseExpression());
        e->items.push_back(std::move(item));
        if (Is(Tok::kComma)) {
          ++i_;
        } else if (!Is(Tok::kRBracket)) {
          return Error(Pos(), fmt::format("expected ',' or ']' in a list, found {}", Describe(Peek())));
        }
      }
      ++i_;
      return e;
    }
    case Tok::kLBrace: {
      ++i_;
      auto e = std::make_unique<Expr>(ExprKind::kDict, pos);
      while (!Is(Tok::kRBrace)) {
        if (i_ >= t_.size()) return Error(pos, "unclosed '{'");
        KVS_ASSIGN_OR_RETURN(ExprPtr key, ParseExpression());
        KVS_RETURN_IF_ERROR(Expect(Tok::kColon, "between a key and its value"));
        KVS_ASSIGN_OR_RETURN(ExprPtr value, ParseExpression());
        e->keys.push_back(std::move(key));
        e->items.push_back(std::move(value));
        if (Is(Tok::kComma)) {
          ++i_;
        } else if (!Is(Tok::kRBrace)) {
          return Error(Pos(), fmt::format("expected ',' or '}}' in a dict, found {}", Describe(Peek())));
        }
      }
      ++i_;
      return e;
    }
    default: return Error(pos, fmt::format("unexpected {} in an expression", Describe(t)));
  }
}

}  // namespace

StatusOr<std::unique_ptr<Program>> Parse(std::vector<Token> tokens, const SourceMap& map) {
  Parser p(std::move(tokens), map);
  return p.Run();
}

}  // namespace kvs::tmpl
