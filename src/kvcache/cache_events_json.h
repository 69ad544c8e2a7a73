// The wire form of a PrefixCacheEvents page: the body of the server's
// GET /v1/cache/blocks, which the gateway's PrefixIndex (gateway/
// prefix_index.h) applies. One encoder, so the server and the gateway's
// tests speak the same format.
//
//   {"object": "cache.blocks", "block_size": 16, "epoch": "<hex>",
//    "seq": N, "reset": bool, "more": bool,
//    "blocks": ["<32 hex>", ...],          reset only: the kFull held set
//    "events": ["+<32 hex>", "-<32 hex>"]  kFull events, in order
//    -- with a sliding-window KV group only (window > 0):
//    "window": W,                           the sliding layers' window, tokens
//    "window_blocks": [...],                reset only: the kWindow held set
//    "window_events": ["+...", "-..."],     kWindow events, in order
//    -- with a disk KV tier only:
//    "disk": true,
//    "disk_blocks": [...],                  reset only: the kDisk held set
//    "disk_events": ["+...", "-..."]}       kDisk events, in order
//
// The window and disk keys are additions: a reader that ignores them sees exactly
// the older format (and overestimates hits on a sliding-window model, as
// before), and a page without them means no window group. The two event
// lists may be applied separately: the held sets are independent, and
// each list keeps its group's order.
// Thread-safety: a pure function.
#pragma once

#include <cstdint>

#include <nlohmann/json.hpp>

#include "kvcache/cache_events.h"

namespace kvs::kvcache {

// `window`: the sliding layers' window in tokens, 0 when there is none;
// `disk`: the replica has a disk tier.
nlohmann::json CacheBlocksJson(const CacheEventsPage& page, int32_t block_size, int32_t window, bool disk = false);

}  // namespace kvs::kvcache
