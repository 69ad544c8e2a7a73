// A JSON-object grammar in GBNF, written for these tests and the benchmark:
// what a user sends as `guided_grammar` for "any JSON object". Whitespace
// runs are bounded so that a walk (or a model) cannot pad forever.
#pragma once

namespace kvs::grammar::testing {

inline constexpr const char* kJsonObjectGbnf = R"gbnf(# an RFC 8259 object at the top
root   ::= obj
obj    ::= "{" sp ( member ( sp "," sp member )* sp )? "}"
member ::= str sp ":" sp val
val    ::= obj | arr | str | num | "true" | "false" | "null"
arr    ::= "[" sp ( val ( sp "," sp val )* sp )? "]"
str    ::= "\"" ( plain | "\\" esc )* "\""
plain  ::= [^"\\\x00-\x1F]
esc    ::= ["\\/bfnrt] | "u" hex hex hex hex
hex    ::= [0-9a-fA-F]
num    ::= "-"? int frac? exp?
int    ::= "0" | [1-9] [0-9]{0,15}
frac   ::= "." [0-9]{1,16}
exp    ::= [eE] [-+]? [0-9]{1,3}
sp     ::= [ \t\n]{0,20}
)gbnf";

}  // namespace kvs::grammar::testing
