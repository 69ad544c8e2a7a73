// Forward declarations of a model's text side (its tokenizer and chat
// template) for headers in higher modules that hold them only by pointer, so
// that such headers need not include the full tokenizer and template headers.
// Declarations only: no invariants, nothing shared at run time.
#pragma once

namespace kvs::tok {
class Tokenizer;
}  // namespace kvs::tok

namespace kvs::tmpl {
class ChatTemplate;
}  // namespace kvs::tmpl
