#include "base/dtype.h"

#include <array>
#include <cstdlib>
#include <strings.h>

namespace kvs {
namespace {

struct Entry {
  uint32_t id;
  DTypeTraits traits;
};

constexpr std::array<Entry, 22> kTable = {{
    {0, {"F32", 1, 4, true}},
    {1, {"F16", 1, 2, true}},
    {2, {"Q4_0", 32, 18, true}},
    {3, {"Q4_1", 32, 20, true}},
    {6, {"Q5_0", 32, 22, true}},
    {7, {"Q5_1", 32, 24, false}},
    {8, {"Q8_0", 32, 34, true}},
    {9, {"Q8_1", 32, 36, false}},
    {10, {"Q2_K", 256, 84, true}},
    {11, {"Q3_K", 256, 110, true}},
    {12, {"Q4_K", 256, 144, true}},
    {13, {"Q5_K", 256, 176, true}},
    {14, {"Q6_K", 256, 210, true}},
    {15, {"Q8_K", 256, 292, false}},
    {20, {"IQ4_NL", 32, 18, true}},
    {23, {"IQ4_XS", 256, 136, true}},
    {24, {"I8", 1, 1, false}},
    {25, {"I16", 1, 2, false}},
    {26, {"I32", 1, 4, false}},
    {27, {"I64", 1, 8, false}},
    {28, {"F64", 1, 8, false}},
    {30, {"BF16", 1, 2, true}},
}};

}  // namespace

std::optional<DTypeTraits> GetDTypeTraits(uint32_t id) {
  for (const Entry& e : kTable) {
    if (e.id == id) return e.traits;
  }
  return std::nullopt;
}

const DTypeTraits& Traits(DType t) {
  for (const Entry& e : kTable) {
    if (e.id == static_cast<uint32_t>(t)) return e.traits;
  }
  std::abort();  // DType values are only ever made from known ids.
}

std::optional<DType> DTypeFromName(std::string_view name) {
  for (const Entry& e : kTable) {
    std::string_view n = e.traits.name;
    if (n.size() == name.size() && strncasecmp(n.data(), name.data(), n.size()) == 0) {
      return static_cast<DType>(e.id);
    }
  }
  return std::nullopt;
}

}  // namespace kvs
