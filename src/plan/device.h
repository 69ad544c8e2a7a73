// Devices and byte quantities for capacity planning.
//
// Device presets use the vendor's datasheet figure in decimal gigabytes
// (1 GB = 10^9 bytes), as NVIDIA prints them: "80GB" is 80e9 bytes and the
// H200's "141GB" is 141e9 bytes. The physical memory of these parts is a
// little larger (power-of-two GiB stacks); the difference is of the order
// of what the driver, ECC and the runtime context take, so the decimal
// figure is the safer planning number.
//   h200 141 GB, h100-80g 80 GB, a100-80g 80 GB, a100-40g 40 GB,
//   l40s 48 GB, a10 24 GB, rtx4090 24 GB.
// "cpu" is this machine's memory (SystemMemoryBytes); "cpu:<bytes>" a given
// amount; a bare quantity ("80GB", "24GiB", "141e9") any device.
// Thread-safety: pure functions, except SystemMemoryBytes which reads files.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace kvs::plan {

// "123", "1.5e9", "80GB", "24GiB", "512M", "64 KiB" -> bytes. Decimal
// suffixes K/KB, M/MB, G/GB, T/TB are powers of 1000; KiB, MiB, GiB, TiB
// powers of 1024 (case-insensitive). The value must be positive.
StatusOr<uint64_t> ParseBytes(std::string_view text);

struct Device {
  std::string name;   // preset name, "cpu", or "custom"
  uint64_t bytes = 0; // memory of one device
};

struct DevicePreset {
  const char* name;
  uint64_t bytes;
  const char* description;
};
const std::vector<DevicePreset>& DevicePresets();

// Resolves --device: a preset name, "cpu", "cpu:<bytes>" or a quantity.
StatusOr<Device> ResolveDevice(std::string_view spec);

// Physical memory of this machine: MemTotal of <root>/proc/meminfo, or the
// cgroup limit when lower (v2 <root>/sys/fs/cgroup/memory.max, v1
// <root>/sys/fs/cgroup/memory/memory.limit_in_bytes). root is "/" except in
// tests.
StatusOr<uint64_t> SystemMemoryBytes(const std::string& root = "/");

// "14.96 GiB" (two decimals), "1.12 MiB" (the largest binary unit that
// keeps the value at least 1, from KiB to GiB), and "16,060,522,496".
std::string FormatGiB(uint64_t bytes);
std::string FormatBinary(uint64_t bytes);
std::string FormatGB(uint64_t bytes);
std::string WithCommas(uint64_t n);

}  // namespace kvs::plan
