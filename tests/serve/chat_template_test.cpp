// Chat templates: the published templates of each model family, interpreted, give exactly the
// prompts those templates define; the built-in family formats agree with them; refusals,
// unknown filters and hostile templates become clear errors.
#include <gtest/gtest.h>

#include <filesystem>

#include "model/gguf.h"
#include "model/tokenizer/tokenizer.h"
#include "serve/chat_families.h"
#include "serve/chat_template.h"
#include "test_data.h"

namespace orchard::serve {
namespace {

// Template texts are the `chat_template` values of each model's tokenizer_config.json
// (JSON string escapes undone): data, not code.

// meta-llama/Llama-2-7b-chat-hf
const char* const kLlama2 =
    R"JINJA({% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = messages[0]['content'] %}{% else %}{% set loop_messages = messages %}{% set system_message = false %}{% endif %}{% for message in loop_messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if loop.index0 == 0 and system_message != false %}{% set content = '<<SYS>>\n' + system_message + '\n<</SYS>>\n\n' + message['content'] %}{% else %}{% set content = message['content'] %}{% endif %}{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %})JINJA";

// meta-llama/Meta-Llama-3-8B-Instruct
const char* const kLlama3 =
    R"JINJA({% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>

'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>

' }}{% endif %})JINJA";

// meta-llama/Llama-3.1-8B-Instruct
const char* const kLlama31 = R"JINJA({{- bos_token }}
{%- if custom_tools is defined %}
    {%- set tools = custom_tools %}
{%- endif %}
{%- if not tools_in_user_message is defined %}
    {%- set tools_in_user_message = true %}
{%- endif %}
{%- if not date_string is defined %}
    {%- set date_string = "26 Jul 2024" %}
{%- endif %}
{%- if not tools is defined %}
    {%- set tools = none %}
{%- endif %}

{#- This block extracts the system message, so we can slot it into the right place. #}
{%- if messages[0]['role'] == 'system' %}
    {%- set system_message = messages[0]['content']|trim %}
    {%- set messages = messages[1:] %}
{%- else %}
    {%- set system_message = "" %}
{%- endif %}

{#- System message + builtin tools #}
{{- "<|start_header_id|>system<|end_header_id|>\n\n" }}
{%- if builtin_tools is defined or tools is not none %}
    {{- "Environment: ipython\n" }}
{%- endif %}
{%- if builtin_tools is defined %}
    {{- "Tools: " + builtin_tools | reject('equalto', 'code_interpreter') | join(", ") + "\n\n"}}
{%- endif %}
{{- "Cutting Knowledge Date: December 2023\n" }}
{{- "Today Date: " + date_string + "\n\n" }}
{%- if tools is not none and not tools_in_user_message %}
    {{- "You have access to the following functions. To call a function, please respond with JSON for a function call." }}
    {{- 'Respond in the format {"name": function name, "parameters": dictionary of argument name and its value}.' }}
    {{- "Do not use variables.\n\n" }}
    {%- for t in tools %}
        {{- t | tojson(indent=4) }}
        {{- "\n\n" }}
    {%- endfor %}
{%- endif %}
{{- system_message }}
{{- "<|eot_id|>" }}

{#- Custom tools are passed in a user message with some extra guidance #}
{%- if tools_in_user_message and not tools is none %}
    {#- Extract the first user message so we can plug it in here #}
    {%- if messages | length != 0 %}
        {%- set first_user_message = messages[0]['content']|trim %}
        {%- set messages = messages[1:] %}
    {%- else %}
        {{- raise_exception("Cannot put tools in the first user message when there's no first user message!") }}
{%- endif %}
    {{- '<|start_header_id|>user<|end_header_id|>\n\n' -}}
    {{- "Given the following functions, please respond with a JSON for a function call " }}
    {{- "with its proper arguments that best answers the given prompt.\n\n" }}
    {{- 'Respond in the format {"name": function name, "parameters": dictionary of argument name and its value}.' }}
    {{- "Do not use variables.\n\n" }}
    {%- for t in tools %}
        {{- t | tojson(indent=4) }}
        {{- "\n\n" }}
    {%- endfor %}
    {{- first_user_message + "<|eot_id|>"}}
{%- endif %}

{%- for message in messages %}
    {%- if not (message.role == 'ipython' or message.role == 'tool' or 'tool_calls' in message) %}
        {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' }}
    {%- elif 'tool_calls' in message %}
        {%- if not message.tool_calls|length == 1 %}
            {{- raise_exception("This model only supports single tool-calls at once!") }}
        {%- endif %}
        {%- set tool_call = message.tool_calls[0].function %}
        {%- if builtin_tools is defined and tool_call.name in builtin_tools %}
            {{- '<|start_header_id|>assistant<|end_header_id|>\n\n' -}}
            {{- "<|python_tag|>" + tool_call.name + ".call(" }}
            {%- for arg_name, arg_val in tool_call.arguments | items %}
                {{- arg_name + '="' + arg_val + '"' }}
                {%- if not loop.last %}
                    {{- ", " }}
                {%- endif %}
                {%- endfor %}
            {{- ")" }}
        {%- else  %}
            {{- '<|start_header_id|>assistant<|end_header_id|>\n\n' -}}
            {{- '{"name": "' + tool_call.name + '", ' }}
            {{- '"parameters": ' }}
            {{- tool_call.arguments | tojson }}
            {{- "}" }}
        {%- endif %}
        {%- if builtin_tools is defined %}
            {#- This means we're in ipython mode #}
            {{- "<|eom_id|>" }}
        {%- else %}
            {{- "<|eot_id|>" }}
        {%- endif %}
    {%- elif message.role == "tool" or message.role == "ipython" %}
        {{- "<|start_header_id|>ipython<|end_header_id|>\n\n" }}
        {%- if message.content is mapping or message.content is iterable %}
            {{- message.content | tojson }}
        {%- else %}
            {{- message.content }}
        {%- endif %}
        {{- "<|eot_id|>" }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|start_header_id|>assistant<|end_header_id|>\n\n' }}
{%- endif %}
)JINJA";

// Qwen/Qwen2.5-7B-Instruct
const char* const kQwen25 = R"JINJA({%- if tools %}
    {{- '<|im_start|>system\n' }}
    {%- if messages[0]['role'] == 'system' %}
        {{- messages[0]['content'] }}
    {%- else %}
        {{- 'You are Qwen, created by Alibaba Cloud. You are a helpful assistant.' }}
    {%- endif %}
    {{- "\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>" }}
    {%- for tool in tools %}
        {{- "\n" }}
        {{- tool | tojson }}
    {%- endfor %}
    {{- "\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n" }}
{%- else %}
    {%- if messages[0]['role'] == 'system' %}
        {{- '<|im_start|>system\n' + messages[0]['content'] + '<|im_end|>\n' }}
    {%- else %}
        {{- '<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n' }}
    {%- endif %}
{%- endif %}
{%- for message in messages %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first) or (message.role == "assistant" and not message.tool_calls) %}
        {{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>' + '\n' }}
    {%- elif message.role == "assistant" %}
        {{- '<|im_start|>' + message.role }}
        {%- if message.content %}
            {{- '\n' + message.content }}
        {%- endif %}
        {%- for tool_call in message.tool_calls %}
            {%- if tool_call.function is defined %}
                {%- set tool_call = tool_call.function %}
            {%- endif %}
            {{- '\n<tool_call>\n{"name": "' }}
            {{- tool_call.name }}
            {{- '", "arguments": ' }}
            {{- tool_call.arguments | tojson }}
            {{- '}\n</tool_call>' }}
        {%- endfor %}
        {{- '<|im_end|>\n' }}
    {%- elif message.role == "tool" %}
        {%- if (loop.index0 == 0) or (messages[loop.index0 - 1].role != "tool") %}
            {{- '<|im_start|>user' }}
        {%- endif %}
        {{- '\n<tool_response>\n' }}
        {{- message.content }}
        {{- '\n</tool_response>' }}
        {%- if loop.last or (messages[loop.index0 + 1].role != "tool") %}
            {{- '<|im_end|>\n' }}
        {%- endif %}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n' }}
{%- endif %}
)JINJA";

// mistralai/Mistral-7B-Instruct-v0.3
const char* const kMistral03 = R"JINJA({%- if messages[0]["role"] == "system" %}
    {%- set system_message = messages[0]["content"] %}
    {%- set loop_messages = messages[1:] %}
{%- else %}
    {%- set loop_messages = messages %}
{%- endif %}
{%- if not tools is defined %}
    {%- set tools = none %}
{%- endif %}
{%- set user_messages = loop_messages | selectattr("role", "equalto", "user") | list %}

{#- This block checks for alternating user/assistant messages, skipping tool calling messages #}
{%- set ns = namespace() %}
{%- set ns.index = 0 %}
{%- for message in loop_messages %}
    {%- if not (message.role == "tool" or message.role == "tool_results" or (message.tool_calls is defined and message.tool_calls is not none)) %}
        {%- if (message["role"] == "user") != (ns.index % 2 == 0) %}
            {{- raise_exception("After the optional system message, conversation roles must alternate user/assistant/user/assistant/...") }}
        {%- endif %}
        {%- set ns.index = ns.index + 1 %}
    {%- endif %}
{%- endfor %}

{{- bos_token }}
{%- for message in loop_messages %}
    {%- if message["role"] == "user" %}
        {%- if tools is not none and (message == user_messages[-1]) %}
            {{- "[AVAILABLE_TOOLS] [" }}
            {%- for tool in tools %}
                {%- set tool = tool.function %}
                {{- '{"type": "function", "function": {' }}
                {%- for key, val in tool.items() if key != "return" %}
                    {%- if val is string %}
                        {{- '"' + key + '": "' + val + '"' }}
                    {%- else %}
                        {{- '"' + key + '": ' + val|tojson }}
                    {%- endif %}
                    {%- if not loop.last %}
                        {{- ", " }}
                    {%- endif %}
                {%- endfor %}
                {{- "}}" }}
                {%- if not loop.last %}
                    {{- ", " }}
                {%- else %}
                    {{- "]" }}
                {%- endif %}
            {%- endfor %}
            {{- "[/AVAILABLE_TOOLS]" }}
            {%- endif %}
        {%- if loop.last and system_message is defined %}
            {{- "[INST] " + system_message + "\n\n" + message["content"] + "[/INST]" }}
        {%- else %}
            {{- "[INST] " + message["content"] + "[/INST]" }}
        {%- endif %}
    {%- elif message.tool_calls is defined and message.tool_calls is not none %}
        {{- "[TOOL_CALLS] [" }}
        {%- for tool_call in message.tool_calls %}
            {%- set out = tool_call.function|tojson %}
            {{- out[:-1] }}
            {%- if not tool_call.id is defined or tool_call.id|length != 9 %}
                {{- raise_exception("Tool call IDs should be alphanumeric strings with length 9!") }}
            {%- endif %}
            {{- ', "id": "' + tool_call.id + '"}' }}
            {%- if not loop.last %}
                {{- ", " }}
            {%- else %}
                {{- "]" + eos_token }}
            {%- endif %}
        {%- endfor %}
    {%- elif message["role"] == "assistant" %}
        {{- " " + message["content"]|trim + eos_token}}
    {%- elif message["role"] == "tool_results" or message["role"] == "tool" %}
        {%- if message.content is defined and message.content.content is defined %}
            {%- set content = message.content.content %}
        {%- else %}
            {%- set content = message.content %}
        {%- endif %}
        {{- '[TOOL_RESULTS] {"content": ' + content|string + ", " }}
        {%- if not message.tool_call_id is defined or message.tool_call_id|length != 9 %}
            {{- raise_exception("Tool call IDs should be alphanumeric strings with length 9!") }}
        {%- endif %}
        {{- '"call_id": "' + message.tool_call_id + '"}[/TOOL_RESULTS]' }}
    {%- else %}
        {{- raise_exception("Only user and assistant roles are supported, with the exception of an initial optional system message!") }}
    {%- endif %}
{%- endfor %}
)JINJA";

// mistralai/Mistral-7B-Instruct-v0.2 (no system role: it raises on one)
const char* const kMistral02 =
    R"JINJA({{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token}}{% else %}{{ raise_exception('Only user and assistant roles are supported!') }}{% endif %}{% endfor %})JINJA";

// google/gemma-2-2b-it (no system role: it raises on one)
const char* const kGemma2 =
    R"JINJA({{ bos_token }}{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if (message['role'] == 'assistant') %}{% set role = 'model' %}{% else %}{% set role = message['role'] %}{% endif %}{{ '<start_of_turn>' + role + '
' + message['content'] | trim + '<end_of_turn>
' }}{% endfor %}{% if add_generation_prompt %}{{'<start_of_turn>model
'}}{% endif %})JINJA";

// google/gemma-3-4b-it
const char* const kGemma3 = R"JINJA({{ bos_token }}
{%- if messages[0]['role'] == 'system' -%}
    {%- if messages[0]['content'] is string -%}
        {%- set first_user_prefix = messages[0]['content'] + '\n\n' -%}
    {%- else -%}
        {%- set first_user_prefix = messages[0]['content'][0]['text'] + '\n\n' -%}
    {%- endif -%}
    {%- set loop_messages = messages[1:] -%}
{%- else -%}
    {%- set first_user_prefix = "" -%}
    {%- set loop_messages = messages -%}
{%- endif -%}
{%- for message in loop_messages -%}
    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}
        {{ raise_exception("Conversation roles must alternate user/assistant/user/assistant/...") }}
    {%- endif -%}
    {%- if (message['role'] == 'assistant') -%}
        {%- set role = "model" -%}
    {%- else -%}
        {%- set role = message['role'] -%}
    {%- endif -%}
    {{ '<start_of_turn>' + role + '\n' + (first_user_prefix if loop.first else "") }}
    {%- if message['content'] is string -%}
        {{ message['content'] | trim }}
    {%- elif message['content'] is iterable -%}
        {%- for item in message['content'] -%}
            {%- if item['type'] == 'image' -%}
                {{ '<start_of_image>' }}
            {%- elif item['type'] == 'text' -%}
                {{ item['text'] | trim }}
            {%- endif -%}
        {%- endfor -%}
    {%- else -%}
        {{ raise_exception("Invalid content type") }}
    {%- endif -%}
    {{ '<end_of_turn>\n' }}
{%- endfor -%}
{%- if add_generation_prompt -%}
    {{'<start_of_turn>model\n'}}
{%- endif -%}
)JINJA";

// microsoft/Phi-3-mini-4k-instruct (the revision with a system role)
const char* const kPhi3 =
    R"JINJA({% for message in messages %}{% if message['role'] == 'system' %}{{'<|system|>
' + message['content'] + '<|end|>
'}}{% elif message['role'] == 'user' %}{{'<|user|>
' + message['content'] + '<|end|>
'}}{% elif message['role'] == 'assistant' %}{{'<|assistant|>
' + message['content'] + '<|end|>
'}}{% endif %}{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>
' }}{% else %}{{ eos_token }}{% endif %})JINJA";

// HuggingFaceH4/zephyr-7b-beta (relies on trim_blocks: the newline after each block tag goes)
const char* const kZephyr = R"JINJA({% for message in messages %}
{% if message['role'] == 'user' %}
{{ '<|user|>
' + message['content'] + eos_token }}
{% elif message['role'] == 'system' %}
{{ '<|system|>
' + message['content'] + eos_token }}
{% elif message['role'] == 'assistant' %}
{{ '<|assistant|>
'  + message['content'] + eos_token }}
{% endif %}
{% if loop.last and add_generation_prompt %}
{{ '<|assistant|>' }}
{% endif %}
{% endfor %})JINJA";

const std::vector<ChatMessage> kChat = {
    {"system", "You are a helpful assistant."},
    {"user", "Hello!"},
    {"assistant", "Hi! How can I help?"},
    {"user", "What is 2+2?"},
};

struct Case {
  const char* name;
  const char* source;
  const char* bos;
  const char* eos;
  const char* family;
  const char* expected;
  bool fallback_matches;  // the built-in format renders the same prompt
};

const Case kCases[] = {
    {"llama2", kLlama2, "<s>", "</s>", "llama2",
     "<s>[INST] <<SYS>>\nYou are a helpful assistant.\n<</SYS>>\n\nHello! [/INST] Hi! How can I help? </s>"
     "<s>[INST] What is 2+2? [/INST]",
     true},
    {"llama3", kLlama3, "<|begin_of_text|>", "<|end_of_text|>", "llama3",
     "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are a helpful assistant.<|eot_id|>"
     "<|start_header_id|>user<|end_header_id|>\n\nHello!<|eot_id|>"
     "<|start_header_id|>assistant<|end_header_id|>\n\nHi! How can I help?<|eot_id|>"
     "<|start_header_id|>user<|end_header_id|>\n\nWhat is 2+2?<|eot_id|>"
     "<|start_header_id|>assistant<|end_header_id|>\n\n",
     true},
    {"llama3.1", kLlama31, "<|begin_of_text|>", "<|eot_id|>", "llama3",
     "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
     "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n"
     "You are a helpful assistant.<|eot_id|>"
     "<|start_header_id|>user<|end_header_id|>\n\nHello!<|eot_id|>"
     "<|start_header_id|>assistant<|end_header_id|>\n\nHi! How can I help?<|eot_id|>"
     "<|start_header_id|>user<|end_header_id|>\n\nWhat is 2+2?<|eot_id|>"
     "<|start_header_id|>assistant<|end_header_id|>\n\n",
     false},
    {"qwen2.5", kQwen25, "", "<|im_end|>", "chatml",
     "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nHello!<|im_end|>\n"
     "<|im_start|>assistant\nHi! How can I help?<|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n"
     "<|im_start|>assistant\n",
     true},
    {"mistral-v0.3", kMistral03, "<s>", "</s>", "mistral",
     "<s>[INST] Hello![/INST] Hi! How can I help?</s>[INST] You are a helpful assistant.\n\nWhat is 2+2?[/INST]",
     true},
    {"mistral-v0.2", kMistral02, "<s>", "</s>", "mistral",
     "<s>[INST] You are a helpful assistant.\n\nHello! [/INST]Hi! How can I help?</s>[INST] What is 2+2? [/INST]",
     false},
    {"gemma2", kGemma2, "<bos>", "<eos>", "gemma",
     "<bos><start_of_turn>user\nYou are a helpful assistant.\n\nHello!<end_of_turn>\n"
     "<start_of_turn>model\nHi! How can I help?<end_of_turn>\n<start_of_turn>user\nWhat is 2+2?<end_of_turn>\n"
     "<start_of_turn>model\n",
     true},
    {"gemma3", kGemma3, "<bos>", "<eos>", "gemma",
     "<bos><start_of_turn>user\nYou are a helpful assistant.\n\nHello!<end_of_turn>\n"
     "<start_of_turn>model\nHi! How can I help?<end_of_turn>\n<start_of_turn>user\nWhat is 2+2?<end_of_turn>\n"
     "<start_of_turn>model\n",
     true},
    {"phi3", kPhi3, "<s>", "<|endoftext|>", "phi3",
     "<|system|>\nYou are a helpful assistant.<|end|>\n<|user|>\nHello!<|end|>\n"
     "<|assistant|>\nHi! How can I help?<|end|>\n<|user|>\nWhat is 2+2?<|end|>\n<|assistant|>\n",
     true},
    {"zephyr", kZephyr, "<s>", "</s>", "zephyr",
     "<|system|>\nYou are a helpful assistant.</s>\n<|user|>\nHello!</s>\n"
     "<|assistant|>\nHi! How can I help?</s>\n<|user|>\nWhat is 2+2?</s>\n<|assistant|>\n",
     true},
};

ChatTemplate make(const Case& c) {
  ChatTemplate t = ChatTemplate::from_source(c.source, c.bos, c.eos);
  t.set_today(2024, 7, 26);
  return t;
}

TEST(ChatTemplate, RendersEachFamilysPublishedTemplateExactly) {
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.name);
    const ChatTemplate t = make(c);
    EXPECT_EQ(t.family(), c.family);
    EXPECT_EQ(t.render(kChat, true), c.expected);
  }
}

TEST(ChatTemplate, BuiltInFormatsMatchThePublishedTemplates) {
  for (const Case& c : kCases) {
    if (!c.fallback_matches) continue;
    SCOPED_TRACE(c.name);
    EXPECT_EQ(render_family(c.family, kChat, true, c.bos, c.eos), c.expected);
  }
}

TEST(ChatTemplate, BuiltInFormatMatchesWithoutSystemMessageOrGenerationPrompt) {
  const std::vector<ChatMessage> chat(kChat.begin() + 1, kChat.end() - 1);  // user, assistant
  for (const Case& c : kCases) {
    // Qwen adds its default system prompt when there is none; the built-in format does not.
    if (!c.fallback_matches || std::string(c.name) == "qwen2.5") continue;
    SCOPED_TRACE(c.name);
    const ChatTemplate t = make(c);
    EXPECT_EQ(t.render(chat, false), render_family(c.family, chat, false, c.bos, c.eos));
  }
}

TEST(ChatTemplate, QwenAddsItsDefaultSystemPromptAndSkipsTheToolsBranch) {
  const ChatTemplate t = ChatTemplate::from_source(kQwen25, "", "<|im_end|>");
  EXPECT_EQ(t.render({{"user", "Hi"}}, true),
            "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n"
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
}

TEST(ChatTemplate, TrimsContentWhereTheTemplateDoes) {
  const ChatTemplate t = ChatTemplate::from_source(kLlama3, "<|begin_of_text|>", "<|end_of_text|>");
  EXPECT_EQ(t.render({{"user", "  padded \n"}}, true),
            "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\npadded<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

TEST(ChatTemplate, FallsBackToTheFamilyFormatWhenTheTemplateDoesNotParse) {
  const std::string broken = std::string(kQwen25) + "{% if %}";
  const ChatTemplate t = ChatTemplate::from_source(broken, "", "<|im_end|>");
  EXPECT_EQ(t.family(), "chatml");
  EXPECT_EQ(t.render(kChat, true), kCases[3].expected);
}

TEST(ChatTemplate, FallsBackToTheFamilyFormatWhenRenderingFails) {
  const ChatTemplate t = ChatTemplate::from_source("<|im_start|>{{ messages | no_such_filter }}", "", "");
  EXPECT_EQ(t.family(), "chatml");
  EXPECT_EQ(t.render({{"user", "x"}}, true), "<|im_start|>user\nx<|im_end|>\n<|im_start|>assistant\n");
}

TEST(ChatTemplate, RaiseExceptionSurfacesWithItsMessage) {
  const ChatTemplate t = ChatTemplate::from_source(
      "{% for m in messages %}{% if m.role == 'tool' %}{{ raise_exception('Tools are not welcome here') }}"
      "{% endif %}{{ m.content }}{% endfor %}",
      "", "");
  EXPECT_EQ(t.family(), "jinja");
  EXPECT_EQ(t.render({{"user", "a"}}, false), "a");
  try {
    t.render({{"user", "a"}, {"tool", "b"}}, false);
    FAIL() << "expected an error";
  } catch (const jinja::RaisedError& e) {
    EXPECT_NE(std::string(e.what()).find("Tools are not welcome here"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("line 1"), std::string::npos) << e.what();
  }
}

TEST(ChatTemplate, UnknownFilterIsAnErrorNamingIt) {
  const ChatTemplate t = ChatTemplate::from_source("{{ messages[0].content | frobnicate }}", "", "");
  try {
    t.render(kChat, true);
    FAIL() << "expected an error";
  } catch (const orchard::Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown filter 'frobnicate'"), std::string::npos) << e.what();
  }
}

TEST(ChatTemplate, UnparsableTemplateOfUnknownFamilyReportsTheParseError) {
  const ChatTemplate t = ChatTemplate::from_source("line one\n{% for x in %}", "", "");
  EXPECT_EQ(t.family(), "jinja");
  try {
    t.render(kChat, true);
    FAIL() << "expected an error";
  } catch (const orchard::Error& e) {
    EXPECT_NE(std::string(e.what()).find("chat template line 2"), std::string::npos) << e.what();
  }
}

TEST(ChatTemplate, RefusesHostileTemplatesCleanly) {
  const char* hostile[] = {
      "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
      "{% set ns = namespace(s='ab') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s }}",
      "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}",
      "{% set ns = namespace() %}{% set ns.me = ns %}{{ ns | tojson }}",
      "{% for i in range(100000) %}{{ 'x' * 1000 }}{% endfor %}",
  };
  for (const char* source : hostile) {
    SCOPED_TRACE(source);
    const ChatTemplate t = ChatTemplate::from_source(source, "", "");
    EXPECT_THROW(t.render(kChat, true), orchard::Error);
  }
  const std::string deep = "{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}";
  EXPECT_THROW(ChatTemplate::from_source(deep, "", "").render(kChat, true), orchard::Error);
  std::string nested;
  for (int k = 0; k < 500; ++k) nested += "{% if true %}";
  EXPECT_THROW(ChatTemplate::from_source(nested, "", "").render(kChat, true), orchard::Error);
}

TEST(ChatTemplate, NoTemplateIsPlain) {
  const ChatTemplate t = ChatTemplate::from_source("", "<s>", "</s>");
  EXPECT_EQ(t.family(), "plain");
  EXPECT_EQ(t.render(kChat, true),
            "system: You are a helpful assistant.\nuser: Hello!\nassistant: Hi! How can I help?\n"
            "user: What is 2+2?\nassistant:");
  EXPECT_EQ(t.render({{"user", "x"}}, false), "user: x\n");
}

TEST(ChatTemplate, StopStringsAreTheEndOfTurnMarkers) {
  using V = std::vector<std::string>;
  EXPECT_EQ(ChatTemplate::from_source(kQwen25, "", "<|im_end|>").stop_strings(), V{"<|im_end|>"});
  EXPECT_EQ(ChatTemplate::from_source(kLlama3, "<|begin_of_text|>", "<|end_of_text|>").stop_strings(),
            (V{"<|eot_id|>", "<|end_of_text|>"}));
  EXPECT_EQ(ChatTemplate::from_source(kGemma2, "<bos>", "<eos>").stop_strings(), (V{"<end_of_turn>", "<eos>"}));
  EXPECT_EQ(ChatTemplate::from_source(kPhi3, "<s>", "<|endoftext|>").stop_strings(), (V{"<|end|>", "<|endoftext|>"}));
  EXPECT_EQ(ChatTemplate::from_source(kZephyr, "<s>", "</s>").stop_strings(), V{"</s>"});
  EXPECT_TRUE(ChatTemplate::from_source("", "", "").parses_special());
}

TEST(ChatTemplate, StrftimeNowAndDateStringReportTheDay) {
  ChatTemplate t = ChatTemplate::from_source("{{ strftime_now('%Y-%m-%d') }} {{ date_string }}", "", "");
  t.set_today(2025, 2, 3);
  EXPECT_EQ(t.render(kChat, true), "2025-02-03 03 Feb 2025");
}

// The vocab-only GGUFs in the shared data that carry a template (see its README).
TEST(ChatTemplate, FromGgufRendersTheFilesTemplate) {
  ORCHARD_REQUIRE_DATA();
  struct File {
    const char* path;
    const char* family;
    const char* expected;
  };
  const File files[] = {
      {"tokenizer/ggml-vocab-llama-bpe.gguf", "llama3", kCases[1].expected},
      {"tokenizer/ggml-vocab-qwen2.gguf", "chatml", kCases[3].expected},  // Qwen3's template
      // This older Phi-3 template has no system role and drops the system message.
      {"tokenizer/ggml-vocab-phi-3.gguf", "phi3",
       "<s><|user|>\nHello!<|end|>\n<|assistant|>\nHi! How can I help?<|end|>\n<|user|>\nWhat is 2+2?<|end|>\n"
       "<|assistant|>\n"},
  };
  for (const File& f : files) {
    SCOPED_TRACE(f.path);
    const auto path = test::data_file(f.path);
    if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " is absent";
    const auto file = GGUFFile::open(path.string());
    const auto tok = Tokenizer::from_gguf(*file);
    const ChatTemplate t = ChatTemplate::from_gguf(*file, *tok);
    EXPECT_EQ(t.family(), f.family);
    EXPECT_EQ(t.render(kChat, true), f.expected);
  }
}

}  // namespace
}  // namespace orchard::serve
