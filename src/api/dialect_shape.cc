#include "api/dialect_shape.h"

#include <utility>

namespace kvs::api {

std::vector<SseOut> DialectShape::Finish(const DialectEnd& end) {
  std::vector<SseOut> ev = FinishChoice(0, {end.finish_reason, end.stop_string});
  for (SseOut& e : End(end.usage)) ev.push_back(std::move(e));
  return ev;
}

}  // namespace kvs::api
