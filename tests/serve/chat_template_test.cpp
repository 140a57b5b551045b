// Chat templates: the published templates of each model family, interpreted, give exactly the
// prompts those templates define; the built-in family formats agree with them; refusals,
// unknown filters and hostile templates become clear errors.
#include <gtest/gtest.h>

#include <filesystem>

#include "model/gguf.h"
#include "model/tokenizer/tokenizer.h"
#include "serve/chat_families.h"
#include "serve/chat_template.h"
#include "serve/published_templates.h"
#include "test_data.h"

namespace orchard::serve {
namespace {

using namespace test_templates;

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
