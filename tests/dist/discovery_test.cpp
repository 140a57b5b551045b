// Cluster discovery: signed announcements, the member table and the multicast beacon.
#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <unistd.h>

#include <chrono>
#include <nlohmann/json.hpp>

#include "dist/discovery/announcement.h"
#include "dist/discovery/beacon.h"
#include "dist/discovery/membership.h"
#include "dist/group.h"

namespace orchard::dist::discovery {
namespace {

Announcement sample(const std::string& id = "00112233aabbccdd") {
  Announcement a;
  a.id = id;
  a.name = "mac-" + id.substr(0, 4);
  a.version = "0.1.0";
  a.control_port = 52181;
  a.probe_port = 52182;
  a.addresses = {"10.0.1.1", "10.0.2.1"};
  a.memory_bytes = 64ull << 30;
  a.available_bytes = 40ull << 30;
  a.cores = 12;
  a.rdma = {"rdma_en3"};
  a.model = "stories260K.gguf";
  a.model_bytes = 1185376;
  a.started_ms = 1796673681000;
  a.seq = 7;
  return a;
}

// Signs `json` as a member would, with OpenSSL directly (an independent reference of the MAC).
std::string signed_datagram(const std::string& secret, const std::string& json) {
  unsigned char mac[32];
  unsigned len = 0;
  HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()), reinterpret_cast<const unsigned char*>(json.data()),
       json.size(), mac, &len);
  char hex[65] = {};
  for (int i = 0; i < 32; ++i) std::snprintf(hex + 2 * i, 3, "%02x", mac[i]);
  return std::string("ORCHARD-CLUSTER ") + hex + " " + json;
}

TEST(Announcement, RoundTripsEveryField) {
  const Announcement a = sample();
  const std::string wire = encode_announcement(a, "s3cret");
  const DecodedAnnouncement d = decode_announcement(wire, "s3cret");
  ASSERT_TRUE(d.announcement) << d.error;
  const Announcement& b = *d.announcement;
  EXPECT_EQ(b.id, a.id);
  EXPECT_EQ(b.name, a.name);
  EXPECT_EQ(b.version, a.version);
  EXPECT_EQ(b.control_port, a.control_port);
  EXPECT_EQ(b.probe_port, a.probe_port);
  EXPECT_EQ(b.addresses, a.addresses);
  EXPECT_EQ(b.memory_bytes, a.memory_bytes);
  EXPECT_EQ(b.available_bytes, a.available_bytes);
  EXPECT_EQ(b.cores, a.cores);
  EXPECT_EQ(b.rdma, a.rdma);
  EXPECT_EQ(b.model, a.model);
  EXPECT_EQ(b.model_bytes, a.model_bytes);
  EXPECT_EQ(b.started_ms, a.started_ms);
  EXPECT_EQ(b.seq, a.seq);
  EXPECT_FALSE(b.leaving);
}

TEST(Announcement, MacIsHmacSha256OfTheJsonWithTheSecret) {
  const std::string wire = encode_announcement(sample(), "s3cret");
  const std::string json = wire.substr(std::string("ORCHARD-CLUSTER ").size() + 65);
  EXPECT_EQ(wire, signed_datagram("s3cret", json));
}

TEST(Announcement, AnotherSecretOrATamperedByteIsAStranger) {
  const std::string wire = encode_announcement(sample(), "s3cret");
  const DecodedAnnouncement other = decode_announcement(wire, "other");
  EXPECT_FALSE(other.announcement);
  EXPECT_TRUE(other.stranger);
  EXPECT_EQ(other.error, "not signed with this cluster's secret");
  std::string tampered = wire;
  tampered[tampered.find("\"cores\":12") + 9] = '9';  // 12 cores -> 92
  const DecodedAnnouncement t = decode_announcement(tampered, "s3cret");
  EXPECT_FALSE(t.announcement);
  EXPECT_TRUE(t.stranger);
  // No secret at all is a secret too (an empty key): it does not open a keyed cluster.
  EXPECT_FALSE(decode_announcement(encode_announcement(sample(), ""), "s3cret").announcement);
}

TEST(Announcement, OtherTrafficIsNotAnAnnouncement) {
  for (const std::string& junk : {std::string(), std::string("hello"), std::string("ORCHARD-CLUSTER zz"),
                                 "ORCHARD-CLUSTER " + std::string(64, 'g') + " {}",
                                 "ORCHARD-CLUSTER " + std::string(64, 'a') + "x{}"}) {
    const DecodedAnnouncement d = decode_announcement(junk, "s");
    EXPECT_FALSE(d.announcement);
    EXPECT_FALSE(d.stranger) << junk;
    EXPECT_EQ(d.error, "not an orchard announcement") << junk;
  }
  const std::string big = signed_datagram("s", std::string(kMaxAnnouncementBytes, ' ') + "{}");
  EXPECT_EQ(decode_announcement(big, "s").error, "not an orchard announcement");
}

TEST(Announcement, SignedButMalformedFieldsAreNamed) {
  nlohmann::json j = nlohmann::json::parse(encode_announcement(sample(), "s").substr(81));
  auto with = [&](const char* key, nlohmann::json value) {
    nlohmann::json k = j;
    if (value.is_discarded()) k.erase(key);
    else k[key] = value;
    return decode_announcement(signed_datagram("s", k.dump()), "s").error;
  };
  EXPECT_EQ(with("id", nlohmann::json::value_t::discarded), "missing \"id\"");
  EXPECT_EQ(with("cores", "twelve"), "\"cores\" has the wrong type");
  EXPECT_EQ(with("cores", -1), "\"cores\" has the wrong type");
  EXPECT_EQ(with("control_port", 70000), "\"control_port\" is not a port");
  EXPECT_EQ(with("addresses", nlohmann::json::array({1, 2})), "\"addresses\" has the wrong type");
  EXPECT_EQ(with("id", ""), "\"id\" must be 1-64 characters");
  EXPECT_EQ(with("seq", 1.5), "\"seq\" has the wrong type");
  EXPECT_EQ(decode_announcement(signed_datagram("s", "[1,2]"), "s").error, "not a JSON object");
  EXPECT_EQ(decode_announcement(signed_datagram("s", "{\"id\":"), "s").error, "not a JSON object");
  // Optional fields may be absent (an older member).
  EXPECT_EQ(with("rdma", nlohmann::json::value_t::discarded), "");
}

TEST(Announcement, TooManyAddressesToFitADatagramIsAnError) {
  Announcement a = sample();
  a.addresses.assign(200, "10.100.100.100");
  EXPECT_THROW(encode_announcement(a, "s"), orchard::Error);
}

TEST(Membership, JoinsUpdatesAndRemembersEachLinkItWasHeardOn) {
  Membership m("self", "0.1.0", 3000);
  Announcement a = sample("aaaa");
  Observation o = m.observe(a, "10.0.1.1", "10.0.1.2", 1000);
  EXPECT_EQ(o.kind, Observation::Joined);
  EXPECT_NE(o.message.find("'mac-aaaa' (aaaa) joined from 10.0.1.1"), std::string::npos) << o.message;
  EXPECT_EQ(m.generation(), 1u);
  EXPECT_EQ(m.observe(a, "10.0.2.1", "10.0.2.2", 1001).kind, Observation::Updated);  // same seq, second link
  ASSERT_EQ(m.members().size(), 1u);
  const Member& mem = m.members().at("aaaa");
  ASSERT_EQ(mem.paths.size(), 2u);
  EXPECT_EQ(mem.paths[0].address, "10.0.1.1");
  EXPECT_EQ(mem.paths[1].local, "10.0.2.2");
  EXPECT_EQ(m.generation(), 1u);  // the set did not change
  EXPECT_EQ(m.observe(sample("self"), "10.0.1.9", "10.0.1.2", 1002).kind, Observation::Self);
  EXPECT_EQ(m.members().size(), 1u);
}

TEST(Membership, ForgetsASilentMemberWithinTheTimeoutAndALinkThatWentQuiet) {
  Membership m("self", "0.1.0", 3000);
  Announcement a = sample("aaaa");
  m.observe(a, "10.0.1.1", "10.0.1.2", 1000);
  m.observe(a, "10.0.2.1", "10.0.2.2", 1000);
  a.seq = 8;
  m.observe(a, "10.0.1.1", "10.0.1.2", 3500);  // the second link went quiet
  EXPECT_TRUE(m.expire(4001).empty());
  EXPECT_EQ(m.members().at("aaaa").paths.size(), 1u);
  EXPECT_TRUE(m.expire(6500).empty());  // exactly the timeout: still there
  const std::vector<std::string> gone = m.expire(6501);
  ASSERT_EQ(gone.size(), 1u);
  EXPECT_NE(gone[0].find("left the cluster: not heard from for 3001 ms"), std::string::npos) << gone[0];
  EXPECT_TRUE(m.members().empty());
  EXPECT_EQ(m.generation(), 2u);
}

TEST(Membership, AReplayedOldAnnouncementCannotBringAGhostBack) {
  Membership m("self", "0.1.0", 3000);
  Announcement a = sample("aaaa");
  a.seq = 5;
  m.observe(a, "10.0.1.1", "10.0.1.2", 1000);
  a.seq = 9;
  m.observe(a, "10.0.1.1", "10.0.1.2", 2000);
  m.expire(10000);
  ASSERT_TRUE(m.members().empty());
  a.seq = 5;  // recorded earlier, sent again by someone else
  EXPECT_EQ(m.observe(a, "10.0.1.66", "10.0.1.2", 10001).kind, Observation::Replayed);
  EXPECT_TRUE(m.members().empty());
}

TEST(Membership, ALeavingMemberIsForgottenAtOnce) {
  Membership m("self", "0.1.0", 3000);
  Announcement a = sample("aaaa");
  m.observe(a, "10.0.1.1", "10.0.1.2", 1000);
  a.seq = 8;
  a.leaving = true;
  const Observation o = m.observe(a, "10.0.1.1", "10.0.1.2", 1100);
  EXPECT_EQ(o.kind, Observation::Left);
  EXPECT_TRUE(m.members().empty());
}

TEST(Membership, AnotherVersionIsRefusedNamingBothVersionsOnce) {
  Membership m("self", "0.1.0", 3000);
  Announcement a = sample("bbbb");
  a.version = "0.0.9";
  const Observation o = m.observe(a, "10.0.1.5", "10.0.1.2", 1000);
  EXPECT_EQ(o.kind, Observation::Refused);
  EXPECT_NE(o.message.find("refused 'mac-bbbb' (bbbb) from 10.0.1.5: it runs orchard 0.0.9, this machine runs orchard 0.1.0"),
            std::string::npos)
      << o.message;
  a.seq++;
  const Observation again = m.observe(a, "10.0.1.5", "10.0.1.2", 1500);
  EXPECT_EQ(again.kind, Observation::Refused);
  EXPECT_TRUE(again.message.empty());  // logged once
  EXPECT_TRUE(m.members().empty());
  EXPECT_EQ(m.refused().size(), 1u);
}

TEST(Beacon, AgentsOnOneMachineHearEachOtherOverLoopback) {
  BeaconOptions o;
  o.port = static_cast<uint16_t>(40000 + ::getpid() % 20000);
  o.interfaces = {"lo"};
  Beacon a(o), b(o);
  ASSERT_EQ(a.interfaces().size(), 1u);
  EXPECT_EQ(a.interfaces()[0].address, "127.0.0.1");
  const std::string wire = encode_announcement(sample(), "s");
  a.send(wire);
  // Both sockets share the port: each hears the datagram (the sender too, by multicast loop).
  for (Beacon* r : {&b, &a}) {
    std::optional<Received> got;
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    while (!got && std::chrono::steady_clock::now() < until) got = r->receive(std::chrono::milliseconds(100));
    ASSERT_TRUE(got);
    EXPECT_EQ(got->datagram, wire);
    EXPECT_EQ(got->from, "127.0.0.1");
    EXPECT_EQ(got->local, "127.0.0.1");
  }
}

TEST(Beacon, RefusesAGroupThatIsNotMulticast) {
  BeaconOptions o;
  o.group = "10.1.2.3";
  EXPECT_THROW(Beacon{o}, CommError);
}

}  // namespace
}  // namespace orchard::dist::discovery
