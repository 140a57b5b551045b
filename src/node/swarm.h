#pragma once
// Many simulated node agents on real connections to one coordinator, and a client timing its
// chats among them (`orchard network load`): what holding tens of thousands of nodes costs a
// coordinator, measured from outside, over the wire. Each node registers with a key of its own,
// signs every request as an agent does, and keeps a long-poll open (its polls are its sign of
// life). A few "worker" nodes hold the chat model and answer each job at once with a fixed
// text, so a chat's time to its first token is the coordinator's own path: placing the job,
// waking the node's parked poll, storing its output and streaming it to the client.
//
// One event loop (Boost.Asio) drives every connection, so the swarm itself needs no thread
// per node; its connections leave from several loopback addresses (127.0.1.1, 127.0.1.2, …),
// as many machines' would.
#include <functional>
#include <string>
#include <vector>

namespace orchard::node {

struct SwarmOptions {
  std::string host = "127.0.0.1";
  int port = 8090;
  std::string api_key;        // the chat client's (Bearer)
  int nodes = 1000;           // idle nodes, each holding a long-poll
  int workers = 2;            // nodes holding the chat model, answering every job at once
  int chats = 100;            // streamed chat requests, one after another, once all nodes poll
  int source_addresses = 16;  // connections leave from 127.0.1.1 … 127.0.1.N
  int in_flight = 200;        // registrations under way at once
  int poll_wait_s = 15;       // each long-poll's wait (below the coordinator's heartbeat timeout)
  double settle_s = 2;        // after the last node polls, before the chats start
};

struct SwarmReport {
  int registered = 0;          // nodes the coordinator accepted
  int polling = 0;             // long-polls open at the coordinator when the chats began
  int chats_ok = 0;            // chats that streamed the workers' text to the end
  std::vector<double> ttft_ms;  // each chat's time from sending to its first token
  std::vector<double> total_ms;
  int errors = 0;              // failed node requests (each retried)
  std::string first_error;
  double setup_s = 0;          // from the first registration to every node polling
};

// Runs the swarm against a coordinator already serving and returns once the chats are done (or
// it gave up: no progress for 60 s). `progress` gets a line now and then.
SwarmReport run_swarm(const SwarmOptions& o, const std::function<void(const std::string&)>& progress = {});

// The q-th quantile (0…1) of `v` (nearest rank); 0 for none.
double quantile(std::vector<double> v, double q);

}  // namespace orchard::node
