// The Jinja subset on its own: syntax, whitespace control, scoping, filters and methods, each
// checked against what Jinja (as Hugging Face configures it) prints.
#include <gtest/gtest.h>

#include "serve/jinja/template.h"

namespace orchard::serve::jinja {
namespace {

std::string render(const std::string& source, nlohmann::ordered_json vars = nlohmann::ordered_json::object(),
                   const Limits& limits = {}) {
  std::tm now{};
  now.tm_year = 124;
  now.tm_mon = 6;
  now.tm_mday = 26;
  return Template::parse(source, limits).render(vars, now);
}

// Smaller than the defaults so the runaway cases stop quickly (also under sanitizers).
Limits small_limits() {
  Limits l;
  l.max_steps = 200'000;
  l.max_bytes = 8 << 20;
  l.max_output = 1 << 20;
  return l;
}

std::string error_of(const std::string& source, const Limits& limits = {}) {
  try {
    render(source, nlohmann::ordered_json::object(), limits);
  } catch (const orchard::Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(Jinja, PrintsTextAndExpressions) {
  EXPECT_EQ(render("a{{ 1 + 2 }}b{# note #}c"), "a3bc");
  EXPECT_EQ(render("{{ 'x' ~ 1 ~ none ~ true }}"), "x1NoneTrue");
  EXPECT_EQ(render("{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 2 ** 10 }}"), "3 -4 1 2 3.5 1024");
  EXPECT_EQ(render("{{ [1, 'a', none] }} {{ {'k': 1.5} }} {{ (2.5e3, 1e-5) }}"), "[1, 'a', None] {'k': 1.5} [2500.0, 1e-05]");
  EXPECT_EQ(render("{{ 'yes' if 1 < 2 else 'no' }}{{ 'x' if false }}"), "yes");
  EXPECT_EQ(render("{{ not 1 in [1, 2] }} {{ 3 not in [1, 2] }} {{ 'b' in 'abc' }}"), "False True True");
  EXPECT_EQ(render("{{ 0 or 'fallback' }} {{ 1 and 2 }}"), "fallback 2");
}

TEST(Jinja, AppliesWhitespaceControlAsHuggingFaceDoes) {
  EXPECT_EQ(render("a  {{- 'b' -}}  c"), "abc");
  // trim_blocks: the newline after a block tag goes; lstrip_blocks: indentation before one goes.
  EXPECT_EQ(render("{% if true %}\n    x\n    {% endif %}\ny"), "    x\ny");
  EXPECT_EQ(render("{{ 'v' }}\n"), "v\n");  // not after an expression
  EXPECT_EQ(render("a\n  {%- if true %} b {% endif -%}\n  c"), "a b c");
  EXPECT_EQ(render("  {%+ if true %}x{% endif +%}\n"), "  x\n");
  EXPECT_EQ(render("{% raw %}{{ not evaluated }}{% endraw %}"), "{{ not evaluated }}");
}

TEST(Jinja, LoopsExposeLoopVariables) {
  EXPECT_EQ(render("{% for x in ['a','b','c'] %}{{ loop.index }}{{ loop.index0 }}{{ x }}"
                   "{% if loop.first %}F{% endif %}{% if loop.last %}L{{ loop.length }}{% endif %},{% endfor %}"),
            "10aF,21b,32cL3,");
  EXPECT_EQ(render("{% for x in [] %}x{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(render("{% for x in range(10) if x is odd %}{{ x }}{% if loop.last %}/{{ loop.length }}{% endif %}{% endfor %}"),
            "13579/5");
  EXPECT_EQ(render("{% for k, v in {'a': 1, 'b': 2}.items() %}{{ k }}={{ v }};{% endfor %}"), "a=1;b=2;");
  EXPECT_EQ(render("{% for x in range(5) %}{% if x == 1 %}{% continue %}{% endif %}{% if x == 3 %}{% break %}{% endif %}{{ x }}{% endfor %}"),
            "02");
}

TEST(Jinja, SetInsideALoopStaysThereButNamespacesCarryOut) {
  EXPECT_EQ(render("{% set x = 1 %}{% for i in [1] %}{% set x = 2 %}{% endfor %}{{ x }}"), "1");
  EXPECT_EQ(render("{% set ns = namespace(x=1) %}{% for i in [1, 2] %}{% set ns.x = ns.x + i %}{% endfor %}{{ ns.x }}"), "4");
  EXPECT_EQ(render("{% set a, b = [1, 2] %}{{ b }}{{ a }}"), "21");
  EXPECT_EQ(render("{% set block %}in {{ 'side' }}{% endset %}[{{ block }}]"), "[in side]");
  EXPECT_EQ(error_of("{% set x = 1 %}{% set x.y = 2 %}"),
            "chat template line 1: cannot set attribute 'y' of 'x' (integer); only a namespace() takes attributes");
}

TEST(Jinja, IndexesAndSlicesLikePython) {
  const nlohmann::ordered_json vars = {{"m", {{{"role", "system"}}, {{"role", "user"}}, {{"role", "assistant"}}}}};
  EXPECT_EQ(render("{{ m[0]['role'] }} {{ m[-1].role }} {{ m[1:] | length }} {{ m[5] is defined }}", vars),
            "system assistant 2 False");
  EXPECT_EQ(render("{% for x in m[::-1] %}{{ x.role[0] }}{% endfor %}", vars), "aus");
  EXPECT_EQ(render("{{ 'héllo'[1] }} {{ 'abcdef'[1:4] }} {{ 'abc'[::-1] }} {{ 'abc'[:-1] }}"), "é bcd cba ab");
}

TEST(Jinja, FiltersAndTests) {
  EXPECT_EQ(render("{{ '  x  ' | trim }}|{{ 'ab' | upper }}|{{ 'AB' | lower }}|{{ 'hello world' | capitalize }}"),
            "x|AB|ab|Hello world");
  EXPECT_EQ(render("{{ [1, 2, 3] | join(', ') }}|{{ [3, 1, 2] | sort | first }}|{{ [1, 2] | last }}|{{ 'abc' | length }}"),
            "1, 2, 3|1|2|3");
  EXPECT_EQ(render("{{ undefined_thing | default('d') }}|{{ '' | default('e', true) }}|{{ 'a-b' | replace('-', '+') }}"),
            "d|e|a+b");
  EXPECT_EQ(render("{{ {'a': [1, 2.5, true, none, 'q\"\\n']} | tojson }}"), R"({"a": [1, 2.5, true, null, "q\"\n"]})");
  EXPECT_EQ(render("{{ {'a': [1]} | tojson(indent=2) }}"), "{\n  \"a\": [\n    1\n  ]\n}");
  EXPECT_EQ(render("{{ [{'r': 'u'}, {'r': 'a'}, {'r': 'u'}] | selectattr('r', 'equalto', 'u') | list | length }}"), "2");
  EXPECT_EQ(render("{{ [{'r': 'u'}, {'r': 'a'}] | map(attribute='r') | join }}"), "ua");
  EXPECT_EQ(render("{{ ['a', 'b'] | reject('equalto', 'a') | join }} {{ {'x': 1} | items | list }}"), "b [['x', 1]]");
  EXPECT_EQ(render("{{ 5 | string ~ 'x' }} {{ '42' | int + 1 }} {{ 1 is number }} {{ 'a' is string }} {{ none is none }}"),
            "5x 43 True True True");
  EXPECT_EQ(render("{{ x is defined }} {{ x is not defined }} {{ [1] is iterable }} {{ {} is mapping }} {{ 4 is divisibleby(2) }}"),
            "False True True True True");
}

TEST(Jinja, StringAndDictMethods) {
  EXPECT_EQ(render("{{ '  a b  '.strip() }}|{{ 'xxa'.lstrip('x') }}|{{ 'a\\n\\n'.rstrip('\\n') }}"), "a b|a|a");
  EXPECT_EQ(render("{{ 'abc'.startswith('ab') }} {{ 'abc'.endswith(('x', 'c')) }} {{ 'a,b,,c'.split(',') }}"),
            "True True ['a', 'b', '', 'c']");
  EXPECT_EQ(render("{{ ' a  b '.split() }} {{ 'x</think>y'.split('</think>')[-1] }} {{ 'Ab'.upper() }}{{ 'Ab'.lower() }}"),
            "['a', 'b'] y ABab");
  EXPECT_EQ(render("{{ 'aaa'.replace('a', 'b', 2) }} {{ {'a': 1}.get('a') }} {{ {'a': 1}.get('z', 'no') }}"), "bba 1 no");
  EXPECT_EQ(render("{% set l = [1] %}{% set _ = l.append(2) %}{{ l }} {{ {'a': 1, 'b': 2}.keys() | list }}"), "[1, 2] ['a', 'b']");
  EXPECT_EQ(render("{{ 'tool_calls' in {'tool_calls': []} }} {{ 'x' in {} }}"), "True False");
}

TEST(Jinja, MacrosAndGlobalFunctions) {
  EXPECT_EQ(render("{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}{{ greet('A') }} {{ greet('B', punct='?') }}"),
            "Hi A! Hi B?");
  EXPECT_EQ(render("{{ range(3) | list }} {{ range(1, 7, 2) | join(',') }}"), "[0, 1, 2] 1,3,5");
  EXPECT_EQ(render("{{ strftime_now('%d %b %Y') }} {{ strftime_now is defined }}"), "26 Jul 2024 True");
  EXPECT_EQ(render("{% generation %}kept{% endgeneration %}"), "kept");
}

TEST(Jinja, ErrorsNameTheLineAndTheProblem) {
  EXPECT_EQ(error_of("ok\n{{ x | nope }}"), "chat template line 2: unknown filter 'nope'");
  EXPECT_EQ(error_of("{{ x is nope }}"), "chat template line 1: unknown test 'nope'");
  EXPECT_EQ(error_of("{{ 1 + 'a' }}"), "chat template line 1: cannot apply '+' to integer and string");
  EXPECT_EQ(error_of("{{ missing + 1 }}"), "chat template line 1: cannot apply '+' to 'missing' (undefined) and integer");
  EXPECT_EQ(error_of("{% if true %}"), "chat template line 1: 'if' opened on line 1 is never closed");
  EXPECT_EQ(error_of("{% frob %}"), "chat template line 1: unknown tag 'frob'");
  EXPECT_EQ(error_of("{{ 'abc }}"), "chat template line 1: unterminated string literal");
  EXPECT_EQ(error_of("{{ 1 / 0 }}"), "chat template line 1: division by zero");
  EXPECT_EQ(error_of("{{ nothing() }}"), "chat template line 1: 'nothing' is undefined");
  try {
    render("\n\n{{ raise_exception('no system role') }}");
    FAIL() << "expected RaisedError";
  } catch (const RaisedError& e) {
    EXPECT_EQ(std::string(e.what()), "chat template line 3 raised an error: no system role");
  }
}

TEST(Jinja, LimitsStopRunawayTemplates) {
  EXPECT_NE(error_of("{% set r = range(3000) %}{% for i in r %}{% for j in r %}{% endfor %}{% endfor %}", small_limits()).find("too much work"),
            std::string::npos);
  // Every list made stays until the render ends, so making lists in a loop runs out of bytes.
  EXPECT_NE(error_of("{% for i in range(3000) %}{% for j in range(3000) %}{% endfor %}{% endfor %}", small_limits()).find("too much data"),
            std::string::npos);
  EXPECT_NE(error_of("{{ 'x' * 100000000 }}", small_limits()).find("output limit"), std::string::npos);
  EXPECT_NE(error_of("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}", small_limits()).find("macro calls nest deeper"), std::string::npos);
  EXPECT_NE(error_of("{% set l = [] %}{% set _ = l.append(l) %}{{ l }}", small_limits()).find("nests too deeply"), std::string::npos);
  EXPECT_NE(error_of("{{ " + std::string(1000, '[') + std::string(1000, ']') + " }}", small_limits()).find("nests too deeply"),
            std::string::npos);
  std::string chain = "{{ x";
  for (int k = 0; k < 1000; ++k) chain += ".a";
  EXPECT_NE(error_of(chain + " }}", small_limits()).find("nests too deeply"), std::string::npos);
  EXPECT_NE(error_of("{{ 9223372036854775807 + 1 }}", small_limits()).find("overflow"), std::string::npos);
  EXPECT_NE(error_of("{{ range(100000000) | length }}", small_limits()).find("too"), std::string::npos);
}

}  // namespace
}  // namespace orchard::serve::jinja
