#pragma once
// This build's version: what `orchard --version` prints and what cluster members compare (a
// member of another version is refused by name; see dist/discovery/membership.h). Kept equal to
// the project's VERSION in CMakeLists.txt (a CLI test checks).
namespace orchard {

inline constexpr const char* kVersion = "0.1.0";

}  // namespace orchard
