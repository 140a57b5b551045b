// `orchard network load`: many simulated nodes on real connections to a running coordinator,
// and a client timing its chats meanwhile (node/swarm.h) — the coordinator's scale, measured
// over the wire.
#include <CLI/CLI.hpp>

#include <cstdio>

#include "cli/network_stores.h"
#include "node/swarm.h"
#include "tensor/error.h"

namespace orchard::cli {

void register_network_load(CLI::App& net) {
  auto o = std::make_shared<node::SwarmOptions>();
  auto* load = net.add_subcommand(
      "load", "Hold many simulated nodes' long-polls on a running coordinator and time chats among them");
  load->add_option("--host", o->host, "The coordinator's address (loopback: the nodes' connections come from 127.0.1.x)")
      ->capture_default_str();
  load->add_option("--port", o->port, "The coordinator's port")->capture_default_str();
  load->add_option("--api-key", o->api_key, "A client API key of the coordinator's (`orchard network api-key create`)")
      ->required();
  load->add_option("--nodes", o->nodes, "Idle nodes, each registered with its own key and holding a long-poll")
      ->capture_default_str()
      ->check(CLI::Range(0, 1'000'000));
  load->add_option("--workers", o->workers, "Nodes holding the chat model, answering each job at once")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  load->add_option("--chats", o->chats, "Streamed chat requests, one after another, once every node polls")
      ->capture_default_str()
      ->check(CLI::Range(1, 1'000'000));
  load->add_option("--sources", o->source_addresses, "Loopback addresses the connections leave from (127.0.1.1 …)")
      ->capture_default_str()
      ->check(CLI::Range(1, 250));
  load->add_option("--in-flight", o->in_flight, "Registrations under way at once")->capture_default_str()->check(CLI::Range(1, 100'000));
  load->add_option("--poll-wait", o->poll_wait_s, "Seconds each long-poll waits (keep it below the coordinator's heartbeat timeout)")
      ->capture_default_str()
      ->check(CLI::Range(1, 30));
  load->footer(
      "Example (the process needs a descriptor per node: ulimit -n):\n"
      "  orchard network serve --data /tmp/coord --no-disk-wait &\n"
      "  orchard network load --api-key $(orchard network api-key create load --data /tmp/coord) --nodes 10000");
  load->callback([o] {
    const node::SwarmReport r =
        node::run_swarm(*o, [](const std::string& line) { std::fprintf(stderr, "load: %s\n", line.c_str()); });
    std::printf("%d nodes registered, %d long-polls open when the chats began (all polling after %.1f s)\n", r.registered,
                r.polling, r.setup_s);
    std::printf("chats: %d of %d streamed to the end; time to first token p50 %.1f ms, p90 %.1f ms, p99 %.1f ms, max %.1f ms\n",
                r.chats_ok, o->chats, node::quantile(r.ttft_ms, 0.5), node::quantile(r.ttft_ms, 0.9),
                node::quantile(r.ttft_ms, 0.99), node::quantile(r.ttft_ms, 1.0));
    std::printf("whole chat p50 %.1f ms; node requests failed (and retried): %d%s%s\n", node::quantile(r.total_ms, 0.5),
                r.errors, r.first_error.empty() ? "" : ", first: ", r.first_error.c_str());
    if (r.chats_ok < o->chats) throw Error("only " + std::to_string(r.chats_ok) + " of " + std::to_string(o->chats) + " chats completed");
  });
}

}  // namespace orchard::cli
