#pragma once
// The APIs `orchard serve` speaks, each a thin adapter over the one Service.
#include <httplib.h>

#include "serve/service.h"

namespace orchard::serve {

// /v1/chat/completions, /v1/completions, /v1/models (OpenAI).
void add_openai_routes(httplib::Server& http, Service& service);
// /api/chat, /api/generate, /api/tags, /api/version, /api/show (Ollama).
void add_ollama_routes(httplib::Server& http, Service& service);
// /v1/messages (Anthropic Messages).
void add_anthropic_routes(httplib::Server& http, Service& service);

}  // namespace orchard::serve
