#include "kvcache/cache_events_json.h"

#include <fmt/format.h>

namespace kvs::kvcache {

nlohmann::json CacheBlocksJson(const CacheEventsPage& page, int32_t block_size, int32_t window, bool disk) {
  using nlohmann::json;
  json events = json::array(), window_events = json::array(), disk_events = json::array();
  for (const CacheEvent& ev : page.events) {
    json& list = ev.group == CacheGroup::kWindow ? window_events : ev.group == CacheGroup::kDisk ? disk_events : events;
    list.push_back((ev.stored ? "+" : "-") + BlockHashHex(ev.hash));
  }
  auto hex_list = [](const std::vector<BlockHash>& hashes) {
    json a = json::array();
    for (const BlockHash& h : hashes) a.push_back(BlockHashHex(h));
    return a;
  };
  // Hashes and the epoch are hex strings: a JSON number cannot hold 64 bits
  // for every client.
  json out = {{"object", "cache.blocks"},
              {"block_size", block_size},
              {"epoch", fmt::format("{:x}", page.epoch)},
              {"seq", page.seq},
              {"reset", page.reset},
              {"more", page.more}};
  if (page.reset) out["blocks"] = hex_list(page.blocks);
  out["events"] = std::move(events);
  if (window > 0) {
    out["window"] = window;
    if (page.reset) out["window_blocks"] = hex_list(page.window_blocks);
    out["window_events"] = std::move(window_events);
  }
  if (disk) {
    out["disk"] = true;
    if (page.reset) out["disk_blocks"] = hex_list(page.disk_blocks);
    out["disk_events"] = std::move(disk_events);
  }
  return out;
}

}  // namespace kvs::kvcache
