#include "protocol/regions.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "tensor/error.h"

namespace orchard::protocol {

namespace {

bool same_letters(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) return false;
  return true;
}

double tenth(double x) { return std::round(x * 10) / 10; }

}  // namespace

const std::vector<Region>& countries() {
  static const std::vector<Region> all = {
#include "protocol/regions.inc"
  };
  return all;
}

Region parse_region(std::string_view s) {
  for (const Region& c : countries())
    if (same_letters(c.name, s)) return c;
  const std::string text(s);
  char* end = nullptr;
  const double lat = std::strtod(text.c_str(), &end);
  if (end != text.c_str() && *end == ',') {
    const char* lon_at = end + 1;
    const double lon = std::strtod(lon_at, &end);
    if (end != lon_at && *end == '\0' && std::isfinite(lat) && std::isfinite(lon) && std::abs(lat) <= 90 &&
        std::abs(lon) <= 180) {
      Region r;
      r.lat = std::round(lat);
      r.lon = std::round(lon);
      char name[32];
      std::snprintf(name, sizeof name, "%.0f°%c %.0f°%c", std::abs(r.lat), r.lat < 0 ? 'S' : 'N', std::abs(r.lon),
                    r.lon < 0 ? 'W' : 'E');
      r.name = name;
      return r;
    }
  }
  throw Error("region '" + text +
              "': name a country as the world map does (e.g. Germany, Japan, United States of America) or give "
              "LATITUDE,LONGITUDE in degrees (e.g. 52.5,13.4; rounded to whole degrees)");
}

Region checked_region(const Region& r) {
  if (r.name.empty() || r.name.size() > 64) throw Error("region.name: expected 1 to 64 characters");
  for (unsigned char c : r.name)
    if (c < 0x20 || c == 0x7f) throw Error("region.name: control characters are not allowed");
  if (!(std::abs(r.lat) <= 90) || !(std::abs(r.lon) <= 180))
    throw Error("region: latitude must be within [-90, 90] and longitude within [-180, 180]");
  return {r.name, tenth(r.lat), tenth(r.lon)};
}

}  // namespace orchard::protocol
