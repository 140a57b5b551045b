#include "model/grammar/json_schema.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include "model/grammar/json_rules.h"

namespace orchard {
namespace {

using json = nlohmann::json;
using Sym = GrammarSymbol;
using Seq = GrammarSequence;

constexpr int kMaxDepth = 64;

// Keywords whose constraint the grammar cannot keep.
const std::set<std::string> kRefused = {
    "pattern", "patternProperties", "multipleOf", "not", "if", "then", "else", "dependentRequired",
    "dependentSchemas", "dependencies", "contains", "minContains", "maxContains", "minProperties",
    "maxProperties", "propertyNames", "unevaluatedProperties", "unevaluatedItems", "$dynamicRef",
    "$recursiveRef", "additionalItems",
};

std::string pointer_token(const std::string& key) {
  std::string out;
  for (char c : key) out += c == '~' ? "~0" : c == '/' ? "~1" : std::string(1, c);
  return out;
}

class Compiler {
 public:
  Compiler(const json& root, GrammarBuilder& b, JsonRules& rules) : root_(root), b_(b), rules_(rules) {}

  uint32_t run() { return compile(root_, "", 0); }

 private:
  uint32_t compile(const json& s, const std::string& path, int depth);
  uint32_t compile_type(const std::string& type, const json& s, const std::string& path, int depth);
  uint32_t compile_object(const json& s, const std::string& path, int depth);
  uint32_t compile_array(const json& s, const std::string& path, int depth);
  uint32_t compile_ref(const std::string& ref, const std::string& path, int depth);
  json merge_all_of(const json& s, const std::string& path);
  const json& resolve(const json& s, const std::string& path);

  uint32_t count(const json& s, const char* key, const std::string& path) {
    const json& v = s.at(key);
    if (!v.is_number_integer() && !v.is_number_unsigned()) throw SchemaError(path + "/" + key, "must be a whole number");
    if (v.is_number_integer() && v.get<int64_t>() < 0) throw SchemaError(path + "/" + key, "must not be negative");
    const auto n = v.get<uint64_t>();
    if (n > 10'000) throw SchemaError(path + "/" + key, "is above 10000 (the grammar would be too large)");
    return static_cast<uint32_t>(n);
  }
  void check_size(const std::string& path) {
    if (b_.symbol_count() > kMaxSchemaSymbols)
      throw SchemaError(path, "the schema is too large (its grammar passes " + std::to_string(kMaxSchemaSymbols) + " symbols)");
  }

  const json& root_;
  GrammarBuilder& b_;
  JsonRules& rules_;
  std::map<std::string, uint32_t> refs_;
};

uint32_t Compiler::compile(const json& s, const std::string& path, int depth) {
  if (depth > kMaxDepth) throw SchemaError(path, "nested more than " + std::to_string(kMaxDepth) + " deep");
  check_size(path);
  if (s.is_boolean()) {
    if (!s.get<bool>()) throw SchemaError(path, "the schema false accepts nothing");
    return rules_.value();
  }
  if (!s.is_object()) throw SchemaError(path, "a schema must be an object or a boolean");
  for (const auto& [key, _] : s.items())
    if (kRefused.count(key)) throw SchemaError(path, "'" + key + "' is not supported");
  if (s.contains("uniqueItems") && s["uniqueItems"] == true) throw SchemaError(path, "'uniqueItems' is not supported");
  if (s.contains("$ref")) {
    if (!s["$ref"].is_string()) throw SchemaError(path + "/$ref", "must be a string");
    return compile_ref(s["$ref"].get<std::string>(), path, depth);
  }
  if (s.contains("allOf")) {
    if (s.contains("anyOf") || s.contains("oneOf")) throw SchemaError(path, "allOf beside anyOf or oneOf is not supported");
    return compile(merge_all_of(s, path), path, depth + 1);
  }

  std::vector<uint32_t> alternatives;
  for (const char* key : {"anyOf", "oneOf"}) {
    if (!s.contains(key)) continue;
    const json& list = s[key];
    if (!list.is_array() || list.empty()) throw SchemaError(path + "/" + key, "must be a non-empty array of schemas");
    for (size_t i = 0; i < list.size(); ++i)
      alternatives.push_back(compile(list[i], path + "/" + key + "/" + std::to_string(i), depth + 1));
  }
  if (alternatives.empty()) {
    if (s.contains("const")) {
      alternatives.push_back(rules_.literal(s["const"].dump()));
    } else if (s.contains("enum")) {
      const json& list = s["enum"];
      if (!list.is_array() || list.empty()) throw SchemaError(path + "/enum", "must be a non-empty array");
      for (const json& v : list) alternatives.push_back(rules_.literal(v.dump()));
    } else {
      std::vector<std::string> types;
      if (s.contains("type")) {
        const json& t = s["type"];
        if (t.is_string()) {
          types.push_back(t.get<std::string>());
        } else if (t.is_array() && !t.empty()) {
          for (const json& one : t) {
            if (!one.is_string()) throw SchemaError(path + "/type", "must be a type name or a list of them");
            types.push_back(one.get<std::string>());
          }
        } else {
          throw SchemaError(path + "/type", "must be a type name or a list of them");
        }
      } else if (s.contains("properties") || s.contains("additionalProperties") || s.contains("required")) {
        types.push_back("object");
      } else if (s.contains("items") || s.contains("prefixItems") || s.contains("minItems") || s.contains("maxItems")) {
        types.push_back("array");
      } else if (s.contains("minLength") || s.contains("maxLength")) {
        types.push_back("string");
      } else if (s.contains("minimum") || s.contains("maximum") || s.contains("exclusiveMinimum") ||
                 s.contains("exclusiveMaximum")) {
        types.push_back("number");
      }
      if (types.empty()) return rules_.value();
      for (const std::string& t : types) {
        alternatives.push_back(compile_type(t, s, path, depth));
        check_size(path);
      }
    }
  }
  if (s.contains("nullable")) {
    if (!s["nullable"].is_boolean()) throw SchemaError(path + "/nullable", "must be a boolean");
    if (s["nullable"].get<bool>()) alternatives.push_back(rules_.null());
  }
  // The same rule twice (anyOf of one $ref twice) would only make the matcher follow both.
  std::vector<uint32_t> distinct;
  for (uint32_t r : alternatives)
    if (std::find(distinct.begin(), distinct.end(), r) == distinct.end()) distinct.push_back(r);
  alternatives.swap(distinct);
  check_size(path);
  if (alternatives.size() == 1) return alternatives[0];
  std::vector<Seq> alts;
  for (uint32_t r : alternatives) alts.push_back({Sym::ref(r)});
  return b_.add_rule("any-of", std::move(alts));
}

uint32_t Compiler::compile_type(const std::string& type, const json& s, const std::string& path, int depth) {
  if (type == "object") return compile_object(s, path, depth);
  if (type == "array") return compile_array(s, path, depth);
  if (type == "boolean") return rules_.boolean();
  if (type == "null") return rules_.null();
  if (type == "string") {
    const uint32_t min = s.contains("minLength") ? count(s, "minLength", path) : 0;
    const uint32_t max = s.contains("maxLength") ? count(s, "maxLength", path) : JsonRules::kUnbounded;
    if (min > max) throw SchemaError(path, "minLength is above maxLength");
    return rules_.string(min, max);
  }
  if (type != "number" && type != "integer") throw SchemaError(path + "/type", "unknown type '" + type + "'");
  // Bounds: minimum / maximum, exclusiveMinimum / exclusiveMaximum as numbers (draft 6 on) or
  // as booleans qualifying minimum / maximum (draft 4).
  std::optional<double> lo, hi;
  bool lo_ex = false, hi_ex = false;
  auto number_at = [&](const char* key) {
    if (!s[key].is_number()) throw SchemaError(path + "/" + key, "must be a number");
    return s[key].get<double>();
  };
  if (s.contains("minimum")) lo = number_at("minimum");
  if (s.contains("maximum")) hi = number_at("maximum");
  for (auto [key, bound, ex, low] :
       {std::tuple{"exclusiveMinimum", &lo, &lo_ex, true}, std::tuple{"exclusiveMaximum", &hi, &hi_ex, false}}) {
    if (!s.contains(key)) continue;
    if (s[key].is_boolean()) {
      *ex = s[key].get<bool>() && bound->has_value();
    } else {
      const double v = number_at(key);
      if (!bound->has_value() || (low ? v >= **bound : v <= **bound)) *bound = v, *ex = true;
    }
  }
  try {
    if (type == "integer") {
      if (!lo && !hi) return rules_.integer();
      auto whole = [&](std::optional<double> v, bool ex, bool low) -> std::optional<int64_t> {
        if (!v) return std::nullopt;
        if (std::fabs(*v) > 1e15) throw SchemaError(path, "bounds beyond ±1e15 are not supported");
        return static_cast<int64_t>(low ? (ex ? std::floor(*v) + 1 : std::ceil(*v)) : (ex ? std::ceil(*v) - 1 : std::floor(*v)));
      };
      return rules_.integer_range(whole(lo, lo_ex, true), whole(hi, hi_ex, false));
    }
    if (!lo && !hi) return rules_.number();
    return rules_.number_range(lo, lo_ex, hi, hi_ex);
  } catch (const SchemaError&) {
    throw;
  } catch (const Error& e) {
    throw SchemaError(path, e.what());
  }
}

uint32_t Compiler::compile_object(const json& s, const std::string& path, int depth) {
  const json empty = json::object();
  const json& props = s.contains("properties") ? s["properties"] : empty;
  if (!props.is_object()) throw SchemaError(path + "/properties", "must be an object");
  std::set<std::string> required;
  if (s.contains("required")) {
    if (!s["required"].is_array()) throw SchemaError(path + "/required", "must be an array of names");
    for (const json& name : s["required"]) {
      if (!name.is_string()) throw SchemaError(path + "/required", "must be an array of names");
      required.insert(name.get<std::string>());
    }
  }
  struct Key {
    std::string name;
    const json* schema;
    std::string path;
  };
  std::vector<Key> keys;
  for (const auto& [name, schema] : props.items())
    keys.push_back({name, &schema, path + "/properties/" + pointer_token(name)});
  const json any = json::object();
  for (const std::string& name : required)
    if (!props.contains(name)) keys.push_back({name, &any, path + "/required"});
  // Other properties are written only when none are declared: a free key could repeat a declared
  // one (the last copy wins in most parsers), and leaving the allowed extras out is still valid.
  const json* extra = nullptr;
  const json yes = true;
  if (s.contains("additionalProperties")) {
    const json& a = s["additionalProperties"];
    if (!(a.is_boolean() || a.is_object())) throw SchemaError(path + "/additionalProperties", "must be a boolean or a schema");
    if (!(a.is_boolean() && !a.get<bool>()) && keys.empty()) extra = &a;
  } else if (keys.empty()) {
    extra = &yes;
  }
  // Each optional property is one more way the next key may begin; past this many the matcher
  // would hold too many parses at once (GrammarMatcher::kMaxStacks).
  size_t optional_count = 0;
  for (const Key& k : keys) optional_count += !required.count(k.name);
  if (optional_count > 100)
    throw SchemaError(path, std::to_string(optional_count) + " optional properties: at most 100 are supported (make some required)");

  const uint32_t ws = rules_.ws();
  // R(i, first): the members from key i on, `first` when none came before (no comma due).
  uint32_t next_first, next_rest;
  if (extra) {
    const uint32_t value = compile(*extra, path + "/additionalProperties", depth + 1);
    const uint32_t kv = b_.add_rule("extra-member", {{Sym::ref(rules_.string()), Sym::ref(ws), Sym::byte(':'), Sym::ref(ws), Sym::ref(value)}});
    next_rest = b_.add_rule("extra-members");
    b_.add_alternative(next_rest, {});
    b_.add_alternative(next_rest, {Sym::byte(','), Sym::ref(ws), Sym::ref(kv), Sym::ref(ws), Sym::ref(next_rest)});
    next_first = b_.add_rule("extra-members-first", {{}, {Sym::ref(kv), Sym::ref(ws), Sym::ref(next_rest)}});
  } else {
    next_first = next_rest = b_.add_rule("no-more-members", {{}});
  }
  for (size_t i = keys.size(); i-- > 0;) {
    const uint32_t value = compile(*keys[i].schema, keys[i].path, depth + 1);
    Seq member = GrammarBuilder::literal(json(keys[i].name).dump());
    member.insert(member.end(), {Sym::ref(ws), Sym::byte(':'), Sym::ref(ws), Sym::ref(value), Sym::ref(ws)});
    const bool optional = !required.count(keys[i].name);
    Seq with_comma{Sym::byte(','), Sym::ref(ws)};
    with_comma.insert(with_comma.end(), member.begin(), member.end());
    with_comma.push_back(Sym::ref(next_rest));
    const uint32_t rest = b_.add_rule("members", {with_comma});
    if (optional) b_.add_alternative(rest, {Sym::ref(next_rest)});
    member.push_back(Sym::ref(next_rest));
    const uint32_t first = b_.add_rule("members-first", {member});
    if (optional) b_.add_alternative(first, {Sym::ref(next_first)});
    next_first = first;
    next_rest = rest;
    check_size(keys[i].path);
  }
  return b_.add_rule("object", {{Sym::byte('{'), Sym::ref(ws), Sym::ref(next_first), Sym::byte('}')}});
}

uint32_t Compiler::compile_array(const json& s, const std::string& path, int depth) {
  std::vector<uint32_t> prefix;
  const json* prefix_list = s.contains("prefixItems") ? &s["prefixItems"] : nullptr;
  const std::string prefix_path = path + (prefix_list ? "/prefixItems" : "/items");
  std::optional<uint32_t> rest;
  if (s.contains("items") && s["items"].is_array()) {
    if (prefix_list) throw SchemaError(path + "/items", "must be a schema when prefixItems is given");
    prefix_list = &s["items"];
  } else if (s.contains("items")) {
    if (!(s["items"].is_boolean() && !s["items"].get<bool>())) rest = compile(s["items"], path + "/items", depth + 1);
  }
  if (prefix_list) {
    if (!prefix_list->is_array()) throw SchemaError(prefix_path, "must be an array of schemas");
    for (size_t i = 0; i < prefix_list->size(); ++i)
      prefix.push_back(compile((*prefix_list)[i], prefix_path + "/" + std::to_string(i), depth + 1));
  } else if (!s.contains("items")) {
    rest = rules_.value();
  }
  const uint32_t min = s.contains("minItems") ? count(s, "minItems", path) : 0;
  const uint32_t max = s.contains("maxItems") ? count(s, "maxItems", path) : JsonRules::kUnbounded;
  if (min > max) throw SchemaError(path, "minItems is above maxItems");
  if (prefix.size() > max) prefix.resize(max);
  // Past the prefix, items follow `rest`; any value when the schema left them open.
  if (!rest && min > prefix.size()) {
    if (s.contains("items") && s["items"] == false) throw SchemaError(path, "minItems asks for more items than items: false allows");
    rest = rules_.value();
  }
  const uint32_t ws = rules_.ws();
  const auto fixed = static_cast<uint32_t>(std::max<size_t>(prefix.size(), min));  // elements spelled out
  auto item = [&](uint32_t k) { return k < prefix.size() ? prefix[k] : *rest; };
  // T(k): what follows the k-th element; from `fixed` on, up to max - fixed more of `rest`.
  Seq tail;
  if (fixed > 0 && rest && max > fixed) {
    const uint32_t more = b_.add_rule("more-items", {{Sym::byte(','), Sym::ref(ws), Sym::ref(*rest), Sym::ref(ws)}});
    tail = rules_.repeat(more, 0, max == JsonRules::kUnbounded ? JsonRules::kUnbounded : max - fixed);
  }
  uint32_t next = b_.add_rule("items-tail", {tail});
  check_size(path);
  for (uint32_t k = fixed; k-- > 1;) {
    const uint32_t t = b_.add_rule("items", {{Sym::byte(','), Sym::ref(ws), Sym::ref(item(k)), Sym::ref(ws), Sym::ref(next)}});
    if (k >= min) b_.add_alternative(t, {});
    next = t;
    check_size(path);
  }
  const uint32_t body = b_.add_rule("items-first");
  if (fixed > 0) {
    b_.add_alternative(body, {Sym::ref(item(0)), Sym::ref(ws), Sym::ref(next)});
  } else if (rest && max > 0) {
    Seq s0{Sym::ref(*rest), Sym::ref(ws)};
    const uint32_t more = b_.add_rule("more-items", {{Sym::byte(','), Sym::ref(ws), Sym::ref(*rest), Sym::ref(ws)}});
    const Seq more_items = rules_.repeat(more, 0, max == JsonRules::kUnbounded ? JsonRules::kUnbounded : max - 1);
    s0.insert(s0.end(), more_items.begin(), more_items.end());
    b_.add_alternative(body, s0);
    check_size(path);
  }
  if (min == 0) b_.add_alternative(body, {});
  return b_.add_rule("array", {{Sym::byte('['), Sym::ref(ws), Sym::ref(body), Sym::byte(']')}});
}

const json& Compiler::resolve(const json& s, const std::string& path) {
  if (!s.contains("$ref")) return s;
  const json& r = s["$ref"];
  if (!r.is_string()) throw SchemaError(path + "/$ref", "must be a string");
  const std::string ref = r.get<std::string>();
  if (ref == "#") return root_;
  if (ref.rfind("#/", 0) != 0) throw SchemaError(path + "/$ref", "only references into this schema (\"#/…\") are supported");
  try {
    return root_.at(json::json_pointer(ref.substr(1)));
  } catch (const json::exception&) {
    throw SchemaError(path + "/$ref", "'" + ref + "' names nothing in the schema");
  }
}

uint32_t Compiler::compile_ref(const std::string& ref, const std::string& path, int depth) {
  if (auto it = refs_.find(ref); it != refs_.end()) return it->second;
  const json& target = resolve(json{{"$ref", ref}}, path);
  // The rule exists before its body is compiled, so a schema may refer to itself.
  const size_t slash = ref.find_last_of('/');
  const uint32_t rule = b_.add_rule("ref-" + (slash == std::string::npos ? std::string("root") : ref.substr(slash + 1)));
  refs_[ref] = rule;
  b_.add_alternative(rule, {Sym::ref(compile(target, ref.substr(1), depth + 1))});
  return rule;
}

json Compiler::merge_all_of(const json& s, const std::string& path) {
  const json& list = s["allOf"];
  if (!list.is_array() || list.empty()) throw SchemaError(path + "/allOf", "must be a non-empty array of schemas");
  json merged = s;
  merged.erase("allOf");
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string at = path + "/allOf/" + std::to_string(i);
    const json& part = resolve(list[i], at);
    if (!part.is_object()) throw SchemaError(at, "allOf is supported for object schemas only");
    for (const auto& [key, v] : part.items()) {
      if (key == "properties") {
        if (!v.is_object()) throw SchemaError(at + "/properties", "must be an object");
        for (const auto& [name, sub] : v.items()) merged["properties"][name] = sub;
      } else if (key == "required") {
        if (!v.is_array()) throw SchemaError(at + "/required", "must be an array of names");
        if (merged.contains("required") && !merged["required"].is_array()) throw SchemaError(path + "/required", "must be an array of names");
        for (const json& name : v) merged["required"].push_back(name);
      } else if (key == "type") {
        if (v != "object") throw SchemaError(at, "allOf is supported for object schemas only");
        merged["type"] = "object";
      } else if (key == "additionalProperties" || key == "title" || key == "description") {
        merged[key] = v;
      } else if (key == "allOf") {
        throw SchemaError(at, "allOf inside allOf is not supported");
      } else {
        throw SchemaError(at, "allOf is supported for properties, required and additionalProperties only, not '" + key + "'");
      }
    }
  }
  return merged;
}

}  // namespace

uint32_t add_json_schema(GrammarBuilder& b, JsonRules& rules, const nlohmann::json& schema) {
  return Compiler(schema, b, rules).run();
}

Grammar build_schema_grammar(const GrammarBuilder& b, uint32_t root) {
  try {
    return b.build(root);
  } catch (const SchemaError&) {
    throw;
  } catch (const Error& e) {
    throw SchemaError("", e.what());
  }
}

Grammar json_schema_grammar(const nlohmann::json& schema) {
  GrammarBuilder b;
  JsonRules rules(b);
  const uint32_t value = add_json_schema(b, rules, schema);
  return build_schema_grammar(b, b.add_rule("root", {{GrammarSymbol::ref(rules.ws()), GrammarSymbol::ref(value)}}));
}

std::shared_ptr<const Grammar> json_object_grammar() {
  static const auto grammar = std::make_shared<const Grammar>(json_schema_grammar({{"type", "object"}}));
  return grammar;
}

}  // namespace orchard
