// The DialectShapes of OpenAI's Chat Completions and Completions, over
// ResponseShape (response.h): the registry's (dialect.h) first two entries.
// Thread-safety: a shape is one request's value.
#pragma once

#include <memory>

#include "api/dialect_shape.h"

namespace kvs::api {

// The shapes of OpenAI's Chat Completions and Completions.
std::unique_ptr<DialectShape> MakeChatShape(ShapeOptions options);
std::unique_ptr<DialectShape> MakeCompletionsShape(ShapeOptions options);

}  // namespace kvs::api
