// `orchard network canary add|list|remove`: the known-answer requests the coordinator mixes into
// nodes' work (docs/verification.md). The answer is computed here, with the pinned file.
#include <cstdio>
#include <memory>
#include <string>

#include "cli/network_stores.h"
#include "network/job_store.h"
#include "network/model_pins.h"
#include "node/audit_runner.h"
#include "node/job_runner.h"
#include "protocol/file_hash.h"
#include "serve/model_store.h"
#include "tensor/error.h"

namespace orchard::cli {

namespace {

struct CanaryOpts {
  std::string dir, db, name, file, prompt, id;
  int max_tokens = 32, threads = 0;
};

network::JobStore open_jobs(const CanaryOpts& o) { return network::JobStore::open(offline_stores(o.dir, o.db).jobs); }

void add(const CanaryOpts& o) {
  if (o.prompt.empty()) throw Error("give the canary's --prompt");
  const std::string path = serve::resolve_model(o.file);
  const std::string sha = protocol::file_sha256(path);
  const auto pin = network::ModelPins::open(offline_stores(o.dir, o.db).model_pins).find(o.name);
  if (!pin)
    throw Error("'" + o.name + "' is not pinned: a canary's answer holds only for one file (orchard network model pin " +
                o.name + " " + path + " first)");
  if (pin->sha256 != sha)
    throw Error(path + " has sha256 " + sha + ", but '" + o.name + "' is pinned to " + pin->sha256);
  node::ServedModel m = node::load_served_model(path, o.name, o.threads, 0);
  protocol::Work w;
  w.job_id = "canary";
  w.model = o.name;
  w.request = {{"api", protocol::kCompletionsApi},
               {"body", {{"model", o.name}, {"prompt", o.prompt}, {"max_tokens", o.max_tokens}, {"temperature", 0}}}};
  w.max_tokens = o.max_tokens;
  const node::CanaryReference ref = node::canary_reference(w, m);
  if (ref.tokens.empty()) throw Error("the model answers the prompt with nothing at all: choose another prompt");
  size_t sure = ref.tokens.size();
  for (size_t i = 0; i < ref.margins.size(); ++i)
    if (ref.margins[i] < 2 * protocol::AuditRules{}.max_gap) {
      sure = i;
      break;
    }
  network::Canary c;
  c.model = o.name;
  c.model_sha256 = sha;
  c.request = w.request;
  c.tokens = ref.tokens;
  c.margins = ref.margins;
  const std::string id = open_jobs(o).add_canary(c, 0);
  std::printf("canary %s: %s, %zu tokens, checked up to token %zu%s\n", id.c_str(), o.name.c_str(), ref.tokens.size(), sure,
              sure < ref.tokens.size() ? " (the next is too close to call)" : "");
  if (sure < 8) std::fprintf(stderr, "warning: only %zu tokens can be checked; a longer or other prompt tells more\n", sure);
}

}  // namespace

void register_network_canary(CLI::App& net) {
  auto o = std::make_shared<CanaryOpts>();
  auto* canary = net.add_subcommand("canary", "Known-answer requests mixed into nodes' work (docs/verification.md)");
  canary->require_subcommand(1);
  auto* add_cmd = canary->add_subcommand("add", "Compute NAME's greedy answer to --prompt with FILE (pinned) and store it");
  add_cmd->add_option("name", o->name, "The pinned model name")->required();
  add_cmd->add_option("file", o->file, "The pinned GGUF file")->required();
  add_cmd->add_option("--prompt", o->prompt, "The prompt (a completion, answered greedily)")->required();
  add_cmd->add_option("--max-tokens", o->max_tokens, "Tokens of the answer")->capture_default_str()->check(CLI::Range(1, 4096));
  add_cmd->add_option("-t,--threads", o->threads, "Threads (0: all cores)")->capture_default_str();
  auto* list = canary->add_subcommand("list", "List the canaries");
  auto* remove = canary->add_subcommand("remove", "Forget a canary");
  remove->add_option("id", o->id, "The canary's id")->required();
  for (CLI::App* c : {add_cmd, list, remove}) {
    c->add_option("--data", o->dir, "The coordinator's data folder")->type_name("DIR");
    c->add_option("--db,--database", o->db, "The coordinator's PostgreSQL database instead")->type_name("URL");
  }
  canary->footer(
      "Examples:\n"
      "  orchard network model pin stories260K stories260K.gguf --data DIR\n"
      "  orchard network canary add stories260K stories260K.gguf --prompt 'Once upon a time' --data DIR\n"
      "  orchard network canary list --data DIR");
  add_cmd->callback([o] { add(*o); });
  list->callback([o] {
    const auto all = open_jobs(*o).canaries();
    if (all.empty()) std::printf("no canaries\n");
    for (const network::Canary& c : all)
      std::printf("%s  %s  %zu tokens  %s\n", c.id.c_str(), c.model.c_str(), c.tokens.size(),
                  c.request["body"].value("prompt", std::string("(chat)")).c_str());
  });
  remove->callback([o] {
    if (!open_jobs(*o).remove_canary(o->id)) throw Error("no canary '" + o->id + "'");
    std::printf("removed %s\n", o->id.c_str());
  });
}

}  // namespace orchard::cli
