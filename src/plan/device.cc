#include "plan/device.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <fstream>
#include <sstream>
#include "base/strings.h"

namespace kvs::plan {
namespace {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

bool ReadFile(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream text;
  text << in.rdbuf();
  *out = text.str();
  return true;
}

// A cgroup limit file: a byte count, or "max" / a huge value for none.
uint64_t CgroupLimit(const std::string& path) {
  std::string text;
  if (!ReadFile(path, &text)) return 0;
  const std::string_view t = Trim(text);
  uint64_t v = 0;
  auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  if (ec != std::errc() || p != t.data() + t.size()) return 0;  // "max"
  return v;
}

}  // namespace

StatusOr<uint64_t> ParseBytes(std::string_view text) {
  const std::string_view t = Trim(text);
  size_t i = 0;
  while (i < t.size() && (std::isdigit(static_cast<unsigned char>(t[i])) || t[i] == '.' || t[i] == '-' ||
                          t[i] == '+' ||
                          ((t[i] == 'e' || t[i] == 'E') && i + 1 < t.size() &&
                           (std::isdigit(static_cast<unsigned char>(t[i + 1])) || t[i + 1] == '+')))) {
    ++i;
  }
  double value = 0;
  auto [p, ec] = std::from_chars(t.data(), t.data() + i, value);
  if (i == 0 || ec != std::errc() || p != t.data() + i) {
    return InvalidArgument("\"{}\" is not a byte quantity (e.g. 24GiB, 80GB, 141e9)", text);
  }
  const std::string suffix = AsciiLower(Trim(t.substr(i)));
  double scale = 0;
  struct Unit { const char* s; double scale; };
  static const Unit kUnits[] = {
      {"", 1},      {"b", 1},     {"k", 1e3},           {"kb", 1e3},          {"m", 1e6},
      {"mb", 1e6},  {"g", 1e9},   {"gb", 1e9},          {"t", 1e12},          {"tb", 1e12},
      {"kib", 1024.0}, {"mib", 1048576.0}, {"gib", 1073741824.0}, {"tib", 1099511627776.0},
  };
  for (const Unit& u : kUnits) {
    if (suffix == u.s) scale = u.scale;
  }
  if (scale == 0) {
    return InvalidArgument("\"{}\": unknown unit \"{}\" (B, KB, MB, GB, TB, KiB, MiB, GiB, TiB)", text, suffix);
  }
  const double bytes = value * scale;
  if (!(bytes >= 1)) return InvalidArgument("\"{}\": a memory size must be positive", text);
  if (bytes > 1e18) return InvalidArgument("\"{}\": implausibly large", text);
  return static_cast<uint64_t>(std::llround(bytes));
}

const std::vector<DevicePreset>& DevicePresets() {
  static const std::vector<DevicePreset> presets = {
      {"h200", 141'000'000'000ull, "NVIDIA H200, 141 GB HBM3e"},
      {"h100-80g", 80'000'000'000ull, "NVIDIA H100, 80 GB HBM"},
      {"a100-80g", 80'000'000'000ull, "NVIDIA A100, 80 GB HBM2e"},
      {"a100-40g", 40'000'000'000ull, "NVIDIA A100, 40 GB HBM2"},
      {"l40s", 48'000'000'000ull, "NVIDIA L40S, 48 GB GDDR6"},
      {"a10", 24'000'000'000ull, "NVIDIA A10, 24 GB GDDR6"},
      {"rtx4090", 24'000'000'000ull, "NVIDIA GeForce RTX 4090, 24 GB GDDR6X"},
  };
  return presets;
}

StatusOr<Device> ResolveDevice(std::string_view spec) {
  const std::string l = AsciiLower(Trim(spec));
  if (l.empty()) return InvalidArgument("--device is empty");
  for (const DevicePreset& p : DevicePresets()) {
    if (l == p.name) return Device{p.name, p.bytes};
  }
  if (l == "cpu") {
    KVS_ASSIGN_OR_RETURN(uint64_t bytes, SystemMemoryBytes());
    return Device{"cpu", bytes};
  }
  if (l.rfind("cpu:", 0) == 0) {
    KVS_ASSIGN_OR_RETURN(uint64_t bytes, ParseBytes(std::string_view(l).substr(4)));
    return Device{"cpu", bytes};
  }
  if (std::isdigit(static_cast<unsigned char>(l[0])) || l[0] == '.') {
    KVS_ASSIGN_OR_RETURN(uint64_t bytes, ParseBytes(l));
    return Device{"custom", bytes};
  }
  std::string known;
  for (const DevicePreset& p : DevicePresets()) known += std::string(known.empty() ? "" : ", ") + p.name;
  return NotFound("unknown device \"{}\" (known: {}, cpu, cpu:<bytes>, or a size such as 80GB)", spec, known);
}

StatusOr<uint64_t> SystemMemoryBytes(const std::string& root) {
  const std::string base = root.empty() || root.back() == '/' ? root : root + "/";
  std::string meminfo;
  if (!ReadFile(base + "proc/meminfo", &meminfo)) return IoError("cannot read {}proc/meminfo", base);
  uint64_t total = 0;
  std::istringstream lines(meminfo);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("MemTotal:", 0) != 0) continue;
    std::istringstream fields(line.substr(9));
    uint64_t kib = 0;
    std::string unit;
    if (fields >> kib >> unit && unit == "kB") total = kib * 1024;
  }
  if (total == 0) return DataLoss("{}proc/meminfo has no MemTotal line in kB", base);
  for (const char* f : {"sys/fs/cgroup/memory.max", "sys/fs/cgroup/memory/memory.limit_in_bytes"}) {
    const uint64_t limit = CgroupLimit(base + f);
    if (limit > 0 && limit < total) total = limit;
  }
  return total;
}

std::string FormatGiB(uint64_t bytes) {
  return fmt::format("{:.2f} GiB", static_cast<double>(bytes) / 1073741824.0);
}

std::string FormatBinary(uint64_t bytes) {
  const double b = static_cast<double>(bytes);
  if (bytes >= (uint64_t{1} << 30)) return FormatGiB(bytes);
  if (bytes >= (uint64_t{1} << 20)) return fmt::format("{:.2f} MiB", b / 1048576.0);
  if (bytes >= 1024) return fmt::format("{:.2f} KiB", b / 1024.0);
  return fmt::format("{} B", bytes);
}

std::string FormatGB(uint64_t bytes) { return fmt::format("{:.2f} GB", static_cast<double>(bytes) / 1e9); }

std::string WithCommas(uint64_t n) {
  std::string digits = std::to_string(n);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

}  // namespace kvs::plan
