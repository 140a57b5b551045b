#include "dist/hostfile.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tensor/error.h"

namespace orchard::dist {

Hostfile parse_hostfile(const std::string& text, const std::string& path) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    // parse_error, and out_of_range for numbers too large for a double (found by fuzzing).
    throw Error(path + ": not valid JSON: " + e.what());
  }
  Hostfile out;
  const nlohmann::json* list = &j;
  if (j.is_object()) {
    if (!j.contains("hosts")) throw Error(path + ": expected a \"hosts\" list");
    list = &j["hosts"];
    if (j.contains("backend")) {
      if (!j["backend"].is_string()) throw Error(path + ": \"backend\" must be a string");
      out.backend = j["backend"].get<std::string>();
    }
  }
  if (!list->is_array() || list->empty()) throw Error(path + ": \"hosts\" must be a non-empty list");
  for (size_t i = 0; i < list->size(); ++i) {
    const auto& h = (*list)[i];
    const std::string where = path + ": hosts[" + std::to_string(i) + "]";
    if (!h.is_object()) throw Error(where + " must be an object with \"ssh\" and \"ips\"");
    HostEntry e;
    if (!h.contains("ssh") || !h["ssh"].is_string() || h["ssh"].get<std::string>().empty())
      throw Error(where + ": missing \"ssh\" (the host name to ssh to)");
    e.ssh = h["ssh"].get<std::string>();
    if (h.contains("ips")) {
      if (!h["ips"].is_array()) throw Error(where + ": \"ips\" must be a list of addresses");
      for (const auto& ip : h["ips"]) {
        if (!ip.is_string()) throw Error(where + ": \"ips\" must hold strings");
        e.ips.push_back(ip.get<std::string>());
      }
    }
    if (h.contains("rdma")) {
      if (!h["rdma"].is_array()) throw Error(where + ": \"rdma\" must be a list (device name or null per peer)");
      for (const auto& d : h["rdma"]) e.rdma.push_back(d.is_string() ? d.get<std::string>() : "");
    }
    out.hosts.push_back(std::move(e));
  }
  return out;
}

Hostfile load_hostfile(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error(path + ": cannot open hostfile");
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_hostfile(ss.str(), path);
}

}  // namespace orchard::dist
