#include "dist/discovery/announcement.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "dist/net/auth.h"
#include "tensor/error.h"

namespace orchard::dist::discovery {
namespace {

constexpr std::string_view kMagic = "ORCHARD-CLUSTER ";
constexpr size_t kMacHex = 64;

// 64 lowercase hex digits, as hmac_hex writes a MAC.
bool is_mac_text(std::string_view text) {
  return text.size() == kMacHex &&
         std::all_of(text.begin(), text.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

// The field `key` of `j` as T, or an error naming it. `need`: absent is an error.
template <class T>
bool read_field(const nlohmann::json& j, const char* key, T& out, std::string& error, bool need = true) {
  const auto it = j.find(key);
  if (it == j.end()) {
    if (need) error = std::string("missing \"") + key + "\"";
    return !need;
  }
  bool ok = false;
  if constexpr (std::is_same_v<T, std::string>) ok = it->is_string();
  else if constexpr (std::is_same_v<T, bool>) ok = it->is_boolean();
  else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
    ok = it->is_array();
    if (ok)
      for (const auto& e : *it) ok = ok && e.is_string();
  } else ok = it->is_number_unsigned() || (it->is_number_integer() && it->template get<int64_t>() >= 0);
  if (!ok) {
    error = std::string("\"") + key + "\" has the wrong type";
    return false;
  }
  if constexpr (std::is_same_v<T, uint16_t>) {
    const uint64_t v = it->template get<uint64_t>();
    if (v > 65535) {
      error = std::string("\"") + key + "\" is not a port";
      return false;
    }
    out = static_cast<uint16_t>(v);
  } else if constexpr (std::is_same_v<T, int>) {
    const uint64_t v = it->template get<uint64_t>();
    if (v > 1'000'000) {
      error = std::string("\"") + key + "\" is out of range";
      return false;
    }
    out = static_cast<int>(v);
  } else {
    out = it->template get<T>();
  }
  return true;
}

}  // namespace

std::string encode_announcement(const Announcement& a, const std::string& secret) {
  const nlohmann::json j = {{"id", a.id},
                            {"name", a.name},
                            {"version", a.version},
                            {"control_port", a.control_port},
                            {"probe_port", a.probe_port},
                            {"addresses", a.addresses},
                            {"memory", a.memory_bytes},
                            {"available", a.available_bytes},
                            {"cores", a.cores},
                            {"rdma", a.rdma},
                            {"model", a.model},
                            {"model_bytes", a.model_bytes},
                            {"started_ms", a.started_ms},
                            {"calibrated", a.calibrated},
                            {"seq", a.seq},
                            {"leaving", a.leaving}};
  const std::string out = sign_announcement_json(j.dump(), secret);
  if (out.size() > kMaxAnnouncementBytes)
    throw Error("cluster announcement of " + std::to_string(out.size()) + " bytes does not fit a datagram (" +
                std::to_string(kMaxAnnouncementBytes) + "): too many addresses or devices");
  return out;
}

std::string sign_announcement_json(std::string_view json, const std::string& secret) {
  return std::string(kMagic) + net::hmac_hex(secret, json) + " " + std::string(json);
}

DecodedAnnouncement decode_announcement(std::string_view datagram, const std::string& secret) {
  DecodedAnnouncement d;
  if (datagram.size() > kMaxAnnouncementBytes || datagram.substr(0, kMagic.size()) != kMagic ||
      datagram.size() < kMagic.size() + kMacHex + 1 || datagram[kMagic.size() + kMacHex] != ' ') {
    d.error = "not an orchard announcement";
    return d;
  }
  const std::string_view claimed = datagram.substr(kMagic.size(), kMacHex);
  if (!is_mac_text(claimed)) {
    d.error = "not an orchard announcement";
    return d;
  }
  const std::string_view text = datagram.substr(kMagic.size() + kMacHex + 1);
  if (!net::hex_macs_equal(net::hmac_hex(secret, text), claimed)) {
    d.error = "not signed with this cluster's secret";
    d.stranger = true;
    return d;
  }
  // Signed by a member: still checked field by field (an older or newer member may send other
  // shapes, and the secret may be shared more widely than the code that holds it).
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    d.error = "not a JSON object";
    return d;
  }
  Announcement a;
  std::string& e = d.error;
  if (!read_field(j, "id", a.id, e) || !read_field(j, "name", a.name, e) || !read_field(j, "version", a.version, e) ||
      !read_field(j, "control_port", a.control_port, e) || !read_field(j, "probe_port", a.probe_port, e) ||
      !read_field(j, "addresses", a.addresses, e) || !read_field(j, "memory", a.memory_bytes, e) ||
      !read_field(j, "available", a.available_bytes, e) || !read_field(j, "cores", a.cores, e) ||
      !read_field(j, "rdma", a.rdma, e, false) || !read_field(j, "model", a.model, e, false) ||
      !read_field(j, "model_bytes", a.model_bytes, e, false) || !read_field(j, "started_ms", a.started_ms, e, false) ||
      !read_field(j, "calibrated", a.calibrated, e, false) ||
      !read_field(j, "seq", a.seq, e) ||
      !read_field(j, "leaving", a.leaving, e, false))
    return d;
  if (a.id.empty() || a.id.size() > 64) {
    e = "\"id\" must be 1-64 characters";
    return d;
  }
  d.announcement = std::move(a);
  return d;
}

}  // namespace orchard::dist::discovery
