#pragma once
// Where a node says it is, coarsely: a country (its outline's centroid) or a point its owner
// names, rounded to whole degrees (about 100 km) — never looked up from an address. The world
// page puts the node there.
#include <string>
#include <string_view>
#include <vector>

namespace orchard::protocol {

struct Region {
  std::string name;
  double lat = 0, lon = 0;  // degrees, north and east positive
};

// The countries the world map draws (regions.inc, generated from world-atlas), by name.
const std::vector<Region>& countries();

// "Germany" (a country of countries(), any case) or "52.5,13.4" (latitude, longitude; rounded
// to whole degrees, named by them). Throws orchard::Error saying how to name a region.
Region parse_region(std::string_view s);

// A region as a node reports it, checked: a name of at most 64 printable characters, latitude
// in [−90, 90] and longitude in [−180, 180], both rounded to 0.1° (countries' centroids are
// given so; points were rounded to whole degrees already). Throws orchard::Error.
Region checked_region(const Region& r);

}  // namespace orchard::protocol
