#include "model/grammar/json_rules.h"

#include <cmath>

#include "tensor/error.h"

namespace orchard {
namespace {

using Sym = GrammarSymbol;
using Seq = GrammarSequence;

Sym range(char lo, char hi) {
  return Sym::bytes(ByteSet::range(static_cast<unsigned char>(lo), static_cast<unsigned char>(hi)));
}
Sym byte(char c) { return Sym::byte(static_cast<unsigned char>(c)); }

Seq concat(Seq a, const Seq& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Decimal strings from x to y, both of the same length (leading zeros allowed: callers put
// the leading digit's bounds in x and y), as alternatives of digit sets.
void same_length_range(const std::string& x, const std::string& y, const Seq& prefix, std::vector<Seq>& out) {
  if (x.empty()) {
    out.push_back(prefix);
    return;
  }
  const size_t rest = x.size() - 1;
  auto any_rest = [&](Seq s) {
    for (size_t i = 0; i < rest; ++i) s.push_back(range('0', '9'));
    return s;
  };
  if (x[0] == y[0]) {
    same_length_range(x.substr(1), y.substr(1), concat(prefix, {byte(x[0])}), out);
    return;
  }
  const std::string nines(rest, '9'), zeros(rest, '0');
  if (x.substr(1) == zeros && y.substr(1) == nines) {
    out.push_back(any_rest(concat(prefix, {range(x[0], y[0])})));
    return;
  }
  same_length_range(x.substr(1), nines, concat(prefix, {byte(x[0])}), out);
  if (x[0] + 1 <= y[0] - 1) out.push_back(any_rest(concat(prefix, {range(static_cast<char>(x[0] + 1), static_cast<char>(y[0] - 1))})));
  same_length_range(zeros, y.substr(1), concat(prefix, {byte(y[0])}), out);
}

}  // namespace

uint32_t JsonRules::memo(const std::string& key) const {
  auto it = memo_.find(key);
  return it == memo_.end() ? UINT32_MAX : it->second;
}

uint32_t JsonRules::remember(const std::string& key, uint32_t rule) {
  memo_[key] = rule;
  return rule;
}

uint32_t JsonRules::ws() {
  if (uint32_t r = memo("ws"); r != UINT32_MAX) return r;
  // ws ::= [ \t\n\r]{0,20}
  ByteSet blank = ByteSet::of(' ');
  blank.add('\t');
  blank.add('\n');
  blank.add('\r');
  const uint32_t blank_rule = b_.add_rule("blank", {{Sym::bytes(blank)}});
  return remember("ws", b_.add_rule("ws", {repeat(blank_rule, 0, 20)}));
}

uint32_t JsonRules::character() {
  if (uint32_t r = memo("char"); r != UINT32_MAX) return r;
  // One character of a string: UTF-8 well formed (no overlongs, no surrogates, ≤ U+10FFFF),
  // never '"', '\' or a control character; or an escape, \u only outside the surrogates (so
  // every escape is one whole character, as a length limit counts).
  ByteSet plain;
  plain.add(0x20, 0x7F);
  plain.bits['"' >> 6] &= ~(uint64_t{1} << ('"' & 63));
  plain.bits['\\' >> 6] &= ~(uint64_t{1} << ('\\' & 63));
  const Sym cont = Sym::bytes(ByteSet::range(0x80, 0xBF));
  ByteSet e1 = ByteSet::range(0xE1, 0xEC);
  e1.add(0xEE, 0xEF);
  ByteSet escaped;
  for (char c : std::string("\"\\/bfnrt")) escaped.add(static_cast<unsigned char>(c));
  ByteSet hex = ByteSet::range('0', '9');
  hex.add('a', 'f');
  hex.add('A', 'F');
  ByteSet hex_lead = ByteSet::range('0', '9');
  hex_lead.add('a', 'c');
  hex_lead.add('A', 'C');
  hex_lead.add('e', 'f');
  hex_lead.add('E', 'F');
  ByteSet d = ByteSet::of('d');
  d.add('D');
  const Sym h = Sym::bytes(hex);
  return remember("char", b_.add_rule("char", {
      {Sym::bytes(plain)},
      {Sym::bytes(ByteSet::range(0xC2, 0xDF)), cont},
      {Sym::byte(0xE0), Sym::bytes(ByteSet::range(0xA0, 0xBF)), cont},
      {Sym::bytes(e1), cont, cont},
      {Sym::byte(0xED), Sym::bytes(ByteSet::range(0x80, 0x9F)), cont},
      {Sym::byte(0xF0), Sym::bytes(ByteSet::range(0x90, 0xBF)), cont, cont},
      {Sym::bytes(ByteSet::range(0xF1, 0xF3)), cont, cont, cont},
      {Sym::byte(0xF4), Sym::bytes(ByteSet::range(0x80, 0x8F)), cont, cont},
      {byte('\\'), Sym::bytes(escaped)},
      {byte('\\'), byte('u'), Sym::bytes(hex_lead), h, h, h},
      {byte('\\'), byte('u'), Sym::bytes(d), range('0', '7'), h, h},
  }));
}

GrammarSequence JsonRules::repeat(uint32_t item, uint32_t min, uint32_t max) {
  Seq out(min, Sym::ref(item));
  const std::string id = std::to_string(item);
  if (max == kUnbounded) {
    uint32_t star = memo("star:" + id);
    if (star == UINT32_MAX) {
      star = remember("star:" + id, b_.add_rule(b_.name(item) + "-star"));
      b_.add_alternative(star, {Sym::ref(item), Sym::ref(star)});
      b_.add_alternative(star, {});
    }
    out.push_back(Sym::ref(star));
  } else if (max > min) {
    // up-to-k ::= item up-to-(k-1) | "", shared by every repetition of the same item.
    uint32_t below = UINT32_MAX;
    for (uint32_t k = 1; k <= max - min; ++k) {
      const std::string key = "upto:" + id + ":" + std::to_string(k);
      uint32_t r = memo(key);
      if (r == UINT32_MAX) {
        r = remember(key, b_.add_rule(b_.name(item) + "-upto-" + std::to_string(k)));
        b_.add_alternative(r, below == UINT32_MAX ? Seq{Sym::ref(item)} : Seq{Sym::ref(item), Sym::ref(below)});
        b_.add_alternative(r, {});
      }
      below = r;
    }
    out.push_back(Sym::ref(below));
  }
  return out;
}

uint32_t JsonRules::string(uint32_t min_chars, uint32_t max_chars) {
  const std::string key = "string:" + std::to_string(min_chars) + ":" + std::to_string(max_chars);
  if (uint32_t r = memo(key); r != UINT32_MAX) return r;
  Seq s{byte('"')};
  s = concat(s, repeat(character(), min_chars, max_chars));
  s.push_back(byte('"'));
  const std::string name = min_chars == 0 && max_chars == kUnbounded ? "string" : "string-" + std::to_string(min_chars) + "-" + (max_chars == kUnbounded ? std::string("inf") : std::to_string(max_chars));
  return remember(key, b_.add_rule(name, {s}));
}

uint32_t JsonRules::literal(const std::string& text) {
  if (uint32_t r = memo("lit:" + text); r != UINT32_MAX) return r;
  return remember("lit:" + text, b_.add_rule("literal", {GrammarBuilder::literal(text)}));
}

uint32_t JsonRules::boolean() {
  if (uint32_t r = memo("boolean"); r != UINT32_MAX) return r;
  return remember("boolean", b_.add_rule("boolean", {GrammarBuilder::literal("true"), GrammarBuilder::literal("false")}));
}

uint32_t JsonRules::null() {
  if (uint32_t r = memo("null"); r != UINT32_MAX) return r;
  return remember("null", b_.add_rule("null", {GrammarBuilder::literal("null")}));
}

uint32_t JsonRules::digit() {
  if (uint32_t r = memo("digit"); r != UINT32_MAX) return r;
  return remember("digit", b_.add_rule("digit", {{range('0', '9')}}));
}

uint32_t JsonRules::digits(uint32_t min, uint32_t max) {
  const std::string key = "digits:" + std::to_string(min) + ":" + std::to_string(max);
  if (uint32_t r = memo(key); r != UINT32_MAX) return r;
  return remember(key, b_.add_rule("digits", {repeat(digit(), min, max)}));
}

uint32_t JsonRules::integer() {
  if (uint32_t r = memo("integer"); r != UINT32_MAX) return r;
  // integer ::= "-"? ("0" | [1-9] [0-9]{0,19})
  const uint32_t magnitude = b_.add_rule("natural", {{byte('0')}, {range('1', '9'), Sym::ref(digits(0, 19))}});
  return remember("integer", b_.add_rule("integer", {{Sym::ref(magnitude)}, {byte('-'), Sym::ref(magnitude)}}));
}

uint32_t JsonRules::number() {
  if (uint32_t r = memo("number"); r != UINT32_MAX) return r;
  // number ::= integer ("." [0-9]{1,20})? ([eE] [-+]? [0-9]{1,2})?  (stays inside a double)
  const uint32_t fraction = b_.add_rule("fraction", {{}, {byte('.'), Sym::ref(digits(1, 20))}});
  ByteSet e = ByteSet::of('e'), sign = ByteSet::of('-');
  e.add('E');
  sign.add('+');
  const uint32_t exponent = b_.add_rule("exponent", {{}, {Sym::bytes(e), Sym::ref(digits(1, 2))},
                                                     {Sym::bytes(e), Sym::bytes(sign), Sym::ref(digits(1, 2))}});
  return remember("number", b_.add_rule("number", {{Sym::ref(integer()), Sym::ref(fraction), Sym::ref(exponent)}}));
}

uint32_t JsonRules::nonneg_range(uint64_t lo, std::optional<uint64_t> hi) {
  const std::string lo_text = std::to_string(lo);
  const size_t top = hi ? std::to_string(*hi).size() : std::max<size_t>(lo_text.size(), 20);
  std::vector<Seq> alts;
  for (size_t n = lo_text.size(); n <= top; ++n) {
    std::string a = n == lo_text.size() ? lo_text : "1" + std::string(n - 1, '0');
    std::string b = hi && n == top ? std::to_string(*hi) : std::string(n, '9');
    same_length_range(a, b, {}, alts);
  }
  return b_.add_rule("natural-range", std::move(alts));
}

uint32_t JsonRules::integer_range(std::optional<int64_t> lo, std::optional<int64_t> hi) {
  if (!lo && !hi) return integer();
  std::string key = "irange:" + (lo ? std::to_string(*lo) : "") + ":" + (hi ? std::to_string(*hi) : "");
  if (uint32_t r = memo(key); r != UINT32_MAX) return r;
  if (lo && hi && *lo > *hi) throw Error("no integer lies between " + std::to_string(*lo) + " and " + std::to_string(*hi));
  const uint32_t rule = b_.add_rule("integer-range");
  if (!hi || *hi >= 0) {
    const uint64_t from = lo && *lo > 0 ? static_cast<uint64_t>(*lo) : 0;
    std::optional<uint64_t> to;
    if (hi) to = static_cast<uint64_t>(*hi);
    b_.add_alternative(rule, {Sym::ref(nonneg_range(from, to))});
  }
  if (!lo || *lo < 0) {
    // -n for n from max(-hi, 1) up to -lo (written so that INT64_MIN does not overflow).
    const uint64_t from = hi && *hi < 0 ? static_cast<uint64_t>(-(*hi + 1)) + 1 : 1;
    std::optional<uint64_t> to;
    if (lo) to = static_cast<uint64_t>(-(*lo + 1)) + 1;
    b_.add_alternative(rule, {byte('-'), Sym::ref(nonneg_range(from, to))});
  }
  return remember(key, rule);
}

uint32_t JsonRules::number_range(std::optional<double> lo, bool lo_exclusive, std::optional<double> hi, bool hi_exclusive) {
  // Whole numbers inside; then "I.f" (f > 0: its last digit is not 0) for I ≥ 0 where
  // lo ≤ I and I + 1 ≤ hi, and "-M.f" for M ≥ 0 where lo ≤ -(M + 1) and -M ≤ hi.
  constexpr double kLimit = 1e15;
  auto clamp = [&](std::optional<double> v) -> std::optional<int64_t> {
    if (!v) return std::nullopt;
    if (std::fabs(*v) > kLimit) throw Error("bounds beyond ±1e15 are not supported");
    return static_cast<int64_t>(*v);
  };
  std::optional<double> whole_lo, whole_hi;
  if (lo) whole_lo = lo_exclusive ? std::floor(*lo) + 1 : std::ceil(*lo);
  if (hi) whole_hi = hi_exclusive ? std::ceil(*hi) - 1 : std::floor(*hi);
  const uint32_t rule = b_.add_rule("number-range");
  bool any = false;
  if (!whole_lo || !whole_hi || *whole_lo <= *whole_hi) {
    b_.add_alternative(rule, {Sym::ref(integer_range(clamp(whole_lo), clamp(whole_hi)))});
    any = true;
  }
  const uint32_t fraction = b_.add_rule("fraction-nonzero", {{byte('.'), Sym::ref(digits(0, 19)), range('1', '9')}});
  // I in [max(0, ceil lo), floor hi - 1]
  const double i_lo = std::max(0.0, lo ? std::ceil(*lo) : 0.0);
  const std::optional<double> i_hi = hi ? std::optional<double>(std::floor(*hi) - 1) : std::nullopt;
  if (!i_hi || i_lo <= *i_hi) {
    b_.add_alternative(rule, {Sym::ref(integer_range(clamp(i_lo), clamp(i_hi))), Sym::ref(fraction)});
    any = true;
  }
  // M in [max(0, ceil(-hi)), floor(-lo) - 1]
  const double m_lo = std::max(0.0, hi ? std::ceil(-*hi) : 0.0);
  const std::optional<double> m_hi = lo ? std::optional<double>(std::floor(-*lo) - 1) : std::nullopt;
  if (!m_hi || m_lo <= *m_hi) {
    b_.add_alternative(rule, {byte('-'), Sym::ref(integer_range(clamp(m_lo), clamp(m_hi))), Sym::ref(fraction)});
    any = true;
  }
  if (!any) throw Error("no number lies in the range given");
  return rule;
}

uint32_t JsonRules::value() {
  if (uint32_t r = memo("value"); r != UINT32_MAX) return r;
  const uint32_t v = remember("value", b_.add_rule("value"));
  b_.add_alternative(v, {Sym::ref(object())});
  b_.add_alternative(v, {Sym::ref(array())});
  b_.add_alternative(v, {Sym::ref(string())});
  b_.add_alternative(v, {Sym::ref(number())});
  b_.add_alternative(v, {Sym::ref(boolean())});
  b_.add_alternative(v, {Sym::ref(null())});
  return v;
}

uint32_t JsonRules::object() {
  if (uint32_t r = memo("object"); r != UINT32_MAX) return r;
  // object ::= "{" ws (member ws ("," ws member ws)*)? "}", member ::= string ws ":" ws value
  const uint32_t o = remember("object", b_.add_rule("object"));
  const uint32_t member = b_.add_rule("member", {{Sym::ref(string()), Sym::ref(ws()), byte(':'), Sym::ref(ws()), Sym::ref(value())}});
  const uint32_t more = b_.add_rule("more-members", {{byte(','), Sym::ref(ws()), Sym::ref(member), Sym::ref(ws())}});
  const uint32_t members = b_.add_rule("members", {{}, concat({Sym::ref(member), Sym::ref(ws())}, repeat(more, 0, kUnbounded))});
  b_.add_alternative(o, {byte('{'), Sym::ref(ws()), Sym::ref(members), byte('}')});
  return o;
}

uint32_t JsonRules::array() {
  if (uint32_t r = memo("array"); r != UINT32_MAX) return r;
  const uint32_t a = remember("array", b_.add_rule("array"));
  const uint32_t more = b_.add_rule("more-values", {{byte(','), Sym::ref(ws()), Sym::ref(value()), Sym::ref(ws())}});
  const uint32_t values = b_.add_rule("values", {{}, concat({Sym::ref(value()), Sym::ref(ws())}, repeat(more, 0, kUnbounded))});
  b_.add_alternative(a, {byte('['), Sym::ref(ws()), Sym::ref(values), byte(']')});
  return a;
}

}  // namespace orchard
