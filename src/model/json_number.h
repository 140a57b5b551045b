#pragma once
// Reading JSON numbers into C++ integers without undefined behaviour.
//
// nlohmann's get<int>() on a floating-point value is a plain static_cast, so a
// peer or a file that writes 1e54 where an integer belongs is undefined
// behaviour (UBSan stops there; without it the value is garbage). Every reader
// of untrusted JSON goes through exact_get<T>(): an integer type takes only a
// whole number that fits; anything else is a json::type_error or
// json::out_of_range, the same exceptions get<T>() throws for a wrong type, so
// callers keep one catch.

#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include <nlohmann/json.hpp>

namespace orchard {

namespace json_number_detail {

template <class T>
constexpr bool is_integer_v = std::is_integral_v<T> && !std::is_same_v<T, bool>;

template <class T>
struct is_integer_vector : std::false_type {};
template <class E, class A>
struct is_integer_vector<std::vector<E, A>> : std::bool_constant<is_integer_v<E>> {};

template <class T>
T integer(const nlohmann::json& v) {
  using L = std::numeric_limits<T>;
  if (v.is_number_unsigned()) {
    const auto u = v.get<uint64_t>();
    if (u <= static_cast<uint64_t>(L::max())) return static_cast<T>(u);
  } else if (v.is_number_integer()) {
    const auto i = v.get<int64_t>();
    const bool fits = std::is_signed_v<T> ? i >= static_cast<int64_t>(L::min()) && i <= static_cast<int64_t>(L::max())
                                          : i >= 0 && static_cast<uint64_t>(i) <= static_cast<uint64_t>(L::max());
    if (fits) return static_cast<T>(i);
  } else if (v.is_number_float()) {
    // 4.0 is accepted as 4; the bounds are compared as doubles, where
    // L::max() + 1 is exact (a power of two) and so is L::min().
    const double d = v.get<double>();
    const double hi = 2.0 * static_cast<double>(L::max() / 2 + 1);
    if (std::isfinite(d) && d == std::floor(d) && d >= static_cast<double>(L::min()) && d < hi) return static_cast<T>(d);
    if (!std::isfinite(d) || d != std::floor(d))
      throw nlohmann::json::type_error::create(302, "expected a whole number, got " + v.dump(), &v);
  } else {
    throw nlohmann::json::type_error::create(302, std::string("expected a number, got ") + v.type_name(), &v);
  }
  throw nlohmann::json::out_of_range::create(406, "number " + v.dump() + " is out of range", &v);
}

}  // namespace json_number_detail

// v.get<T>(), except that integers (and vectors of them) must fit exactly.
template <class T>
T exact_get(const nlohmann::json& v) {
  using namespace json_number_detail;
  if constexpr (is_integer_v<T>) {
    return integer<T>(v);
  } else if constexpr (is_integer_vector<T>::value) {
    if (!v.is_array()) throw nlohmann::json::type_error::create(302, std::string("expected an array, got ") + v.type_name(), &v);
    T out;
    out.reserve(v.size());
    for (const auto& e : v) out.push_back(integer<typename T::value_type>(e));
    return out;
  } else {
    return v.get<T>();
  }
}

}  // namespace orchard
