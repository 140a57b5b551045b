#include "model/grammar/grammar.h"

#include <functional>

#include "tensor/error.h"

namespace orchard {
namespace {

uint32_t add_len(uint32_t a, uint32_t b) {
  return a == Grammar::kNoEnd || b == Grammar::kNoEnd ? Grammar::kNoEnd : a + b;
}

// One byte as GBNF writes it inside quotes or brackets.
std::string escape_byte(unsigned char c, bool in_brackets) {
  static const char* hex = "0123456789ABCDEF";
  if (c == '\n') return "\\n";
  if (c == '\r') return "\\r";
  if (c == '\t') return "\\t";
  if (c == '\\') return "\\\\";
  if (!in_brackets && c == '"') return "\\\"";
  if (in_brackets && (c == ']' || c == '-' || c == '^')) return std::string("\\") + static_cast<char>(c);
  if (c < 0x20 || c >= 0x7F) return std::string("\\x") + hex[c >> 4] + hex[c & 15];
  return std::string(1, static_cast<char>(c));
}

std::string set_text(const ByteSet& s) {
  std::string out = "[";
  for (unsigned c = 0; c < 256;) {
    if (!s.has(static_cast<unsigned char>(c))) {
      ++c;
      continue;
    }
    unsigned hi = c;
    while (hi + 1 < 256 && s.has(static_cast<unsigned char>(hi + 1))) ++hi;
    out += escape_byte(static_cast<unsigned char>(c), true);
    if (hi > c) out += (hi > c + 1 ? "-" : "") + escape_byte(static_cast<unsigned char>(hi), true);
    c = hi + 1;
  }
  return out + "]";
}

}  // namespace

uint32_t GrammarBuilder::add_rule(std::string_view name) {
  std::string unique(name);
  if (by_name_.count(unique)) {
    uint32_t& k = next_suffix_.try_emplace(unique, 2).first->second;
    while (by_name_.count(std::string(name) + "-" + std::to_string(k))) ++k;
    unique = std::string(name) + "-" + std::to_string(k++);
  }
  by_name_.emplace(unique, static_cast<uint32_t>(names_.size()));
  names_.push_back(std::move(unique));
  rules_.emplace_back();
  return static_cast<uint32_t>(names_.size() - 1);
}

uint32_t GrammarBuilder::add_rule(std::string_view name, std::vector<GrammarSequence> alternatives) {
  const uint32_t r = add_rule(name);
  for (GrammarSequence& s : alternatives) add_alternative(r, std::move(s));
  return r;
}

void GrammarBuilder::add_alternative(uint32_t rule, GrammarSequence seq) {
  symbols_ += seq.size() + 1;
  rules_.at(rule).push_back(std::move(seq));
}

uint32_t GrammarBuilder::find(std::string_view name) const {
  auto it = by_name_.find(std::string(name));
  return it == by_name_.end() ? UINT32_MAX : it->second;
}

GrammarSequence GrammarBuilder::literal(std::string_view text) {
  GrammarSequence s;
  for (char c : text) s.push_back(GrammarSymbol::byte(static_cast<unsigned char>(c)));
  return s;
}

Grammar GrammarBuilder::build(uint32_t root) const {
  const size_t n = rules_.size();
  if (root >= n) throw Error("grammar: no root rule");
  for (size_t r = 0; r < n; ++r) {
    if (rules_[r].empty()) throw Error("grammar: rule '" + names_[r] + "' is used but never defined");
    for (const GrammarSequence& seq : rules_[r])
      for (const GrammarSymbol& s : seq)
        if (s.is_rule && s.rule >= n) throw Error("grammar: rule '" + names_[r] + "' refers to an unknown rule");
  }

  // Per rule: the fewest bytes it can be (kNoEnd: never finishes) and the bytes it starts with,
  // both to a fixed point since rules refer to each other.
  std::vector<uint32_t> rule_min(n, Grammar::kNoEnd);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < n; ++r)
      for (const GrammarSequence& seq : rules_[r]) {
        uint32_t len = 0;
        for (const GrammarSymbol& s : seq) len = add_len(len, s.is_rule ? rule_min[s.rule] : 1);
        if (len < rule_min[r]) rule_min[r] = len, changed = true;
      }
  }
  for (size_t r = 0; r < n; ++r)
    if (rule_min[r] == Grammar::kNoEnd) throw Error("grammar: rule '" + names_[r] + "' can never finish");
  std::vector<ByteSet> rule_first(n);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < n; ++r)
      for (const GrammarSequence& seq : rules_[r])
        for (const GrammarSymbol& s : seq) {
          ByteSet before = rule_first[r];
          rule_first[r].add(s.is_rule ? rule_first[s.rule] : s.set);
          if (!(before == rule_first[r])) changed = true;
          if (!s.is_rule || rule_min[s.rule] != 0) break;
        }
  }

  // Left recursion: a rule reachable from itself without a byte read in between.
  std::vector<uint8_t> colour(n, 0);  // 0 unseen, 1 on the path, 2 done
  std::function<void(size_t)> visit = [&](size_t r) {
    colour[r] = 1;
    for (const GrammarSequence& seq : rules_[r])
      for (const GrammarSymbol& s : seq) {
        if (!s.is_rule) break;
        if (colour[s.rule] == 1) throw Error("grammar: rule '" + names_[s.rule] + "' is left-recursive");
        if (colour[s.rule] == 0) visit(s.rule);
        if (rule_min[s.rule] != 0) break;
      }
    colour[r] = 2;
  };
  for (size_t r = 0; r < n; ++r)
    if (colour[r] == 0) visit(r);

  Grammar g;
  g.root = root;
  g.rule_names = names_;
  g.rule_nullable.resize(n);
  for (size_t r = 0; r < n; ++r) g.rule_nullable[r] = rule_min[r] == 0;
  g.elements.push_back({Grammar::Kind::Rule, root});
  g.elements.push_back({Grammar::Kind::End, 0});
  g.alt_begin.push_back(0);
  for (size_t r = 0; r < n; ++r) {
    for (const GrammarSequence& seq : rules_[r]) {
      g.alts.push_back(static_cast<uint32_t>(g.elements.size()));
      for (const GrammarSymbol& s : seq) {
        if (s.is_rule) {
          g.elements.push_back({Grammar::Kind::Rule, s.rule});
        } else {
          g.elements.push_back({Grammar::Kind::Bytes, static_cast<uint32_t>(g.sets.size())});
          g.sets.push_back(s.set);
        }
      }
      g.elements.push_back({Grammar::Kind::End, 0});
    }
    g.alt_begin.push_back(static_cast<uint32_t>(g.alts.size()));
  }

  // Per element, backwards from each End.
  const size_t ne = g.elements.size();
  g.first.resize(ne);
  g.nullable.resize(ne);
  g.min_len.resize(ne);
  for (size_t i = ne; i-- > 0;) {
    const Grammar::Element& e = g.elements[i];
    if (e.kind == Grammar::Kind::End) {
      g.nullable[i] = 1;
      g.min_len[i] = 0;
    } else if (e.kind == Grammar::Kind::Bytes) {
      g.first[i] = g.sets[e.arg];
      g.min_len[i] = add_len(1, g.min_len[i + 1]);
    } else {
      g.first[i] = rule_first[e.arg];
      if (g.rule_nullable[e.arg]) g.first[i].add(g.first[i + 1]);
      g.nullable[i] = g.rule_nullable[e.arg] && g.nullable[i + 1];
      g.min_len[i] = add_len(rule_min[e.arg], g.min_len[i + 1]);
    }
  }
  return g;
}

std::string Grammar::to_gbnf() const {
  std::string out;
  for (size_t r = 0; r < rule_count(); ++r) {
    out += (r == root ? "root" : rule_names[r]) + " ::=";
    for (uint32_t a = alt_begin[r]; a < alt_begin[r + 1]; ++a) {
      if (a > alt_begin[r]) out += " |";
      std::string quoted;
      auto flush = [&] {
        if (!quoted.empty()) out += " \"" + quoted + "\"";
        quoted.clear();
      };
      bool empty = true;
      for (uint32_t e = alts[a]; elements[e].kind != Kind::End; ++e) {
        empty = false;
        if (elements[e].kind == Kind::Rule) {
          flush();
          out += " " + (elements[e].arg == root ? std::string("root") : rule_names[elements[e].arg]);
          continue;
        }
        const ByteSet& s = sets[elements[e].arg];
        int count = 0, only = 0;
        for (int c = 0; c < 256 && count < 2; ++c)
          if (s.has(static_cast<unsigned char>(c))) ++count, only = c;
        if (count == 1) {
          quoted += escape_byte(static_cast<unsigned char>(only), false);
        } else {
          flush();
          out += " " + set_text(s);
        }
      }
      flush();
      if (empty) out += " \"\"";
    }
    out += "\n";
  }
  return out;
}

}  // namespace orchard
