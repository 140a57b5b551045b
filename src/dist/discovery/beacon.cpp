#include "dist/discovery/beacon.h"

#include <arpa/inet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "dist/group.h"
#include "platform/platform.h"

namespace orchard::dist::discovery {
namespace {

in_addr ipv4(const std::string& text, const std::string& what) {
  in_addr a{};
  if (::inet_pton(AF_INET, text.c_str(), &a) != 1) throw CommError(what + ": '" + text + "' is not an IPv4 address");
  return a;
}

std::string errno_text() { return std::strerror(errno); }

}  // namespace

Beacon::Beacon(BeaconOptions options) : options_(std::move(options)) {
  const in_addr group = ipv4(options_.group, "cluster group");
  if ((ntohl(group.s_addr) >> 28) != 14) throw CommError("cluster group " + options_.group + " is not a multicast address");
  fd_ = net::Fd(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!fd_) throw CommError("cannot open a UDP socket: " + errno_text());
  const int one = 1;
  // Several agents on one machine (tests, a machine with two roles) all hear the group.
  ::setsockopt(fd_.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
#ifdef SO_REUSEPORT
  ::setsockopt(fd_.get(), SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
#endif
  ::setsockopt(fd_.get(), IPPROTO_IP, IP_PKTINFO, &one, sizeof one);
  const unsigned char loop = 1, ttl = 1;  // one hop: the cluster is the machines on this link
  ::setsockopt(fd_.get(), IPPROTO_IP, IP_MULTICAST_LOOP, &loop, sizeof loop);
  ::setsockopt(fd_.get(), IPPROTO_IP, IP_MULTICAST_TTL, &ttl, sizeof ttl);
  sockaddr_in bind_to{};
  bind_to.sin_family = AF_INET;
  bind_to.sin_port = htons(options_.port);
  bind_to.sin_addr.s_addr = htonl(INADDR_ANY);
  if (::bind(fd_.get(), reinterpret_cast<sockaddr*>(&bind_to), sizeof bind_to) != 0)
    throw CommError("cannot bind UDP port " + std::to_string(options_.port) + " for cluster discovery: " + errno_text());
  refresh_interfaces();
}

void Beacon::refresh_interfaces() {
  std::vector<BeaconInterface> now;
  for (const platform::NetInterface& n : platform::network_interfaces()) {
    if (!n.up) continue;
    const bool named = std::find(options_.interfaces.begin(), options_.interfaces.end(), n.name) != options_.interfaces.end();
    if (!options_.interfaces.empty() ? !named : (n.loopback && !options_.loopback)) continue;
    now.push_back({n.name, n.address});
  }
  const in_addr group = ipv4(options_.group, "cluster group");
  for (const BeaconInterface& i : now) {
    const bool had = std::any_of(joined_.begin(), joined_.end(),
                                 [&](const BeaconInterface& j) { return j.address == i.address; });
    if (had) continue;
    ip_mreq m{};
    m.imr_multiaddr = group;
    m.imr_interface = ipv4(i.address, "interface " + i.name);
    // EADDRINUSE: joined already on this interface (two addresses on one interface).
    if (::setsockopt(fd_.get(), IPPROTO_IP, IP_ADD_MEMBERSHIP, &m, sizeof m) != 0 && errno != EADDRINUSE)
      throw CommError("cannot join cluster group " + options_.group + " on " + i.name + " (" + i.address +
                      "): " + errno_text());
  }
  joined_ = std::move(now);
}

void Beacon::send(const std::string& datagram) {
  refresh_interfaces();
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(options_.port);
  to.sin_addr = ipv4(options_.group, "cluster group");
  for (const BeaconInterface& i : joined_) {
    const in_addr out = ipv4(i.address, "interface " + i.name);
    ::setsockopt(fd_.get(), IPPROTO_IP, IP_MULTICAST_IF, &out, sizeof out);
    // A failed send on one interface (it just went down) must not silence the others.
    ::sendto(fd_.get(), datagram.data(), datagram.size(), MSG_DONTWAIT, reinterpret_cast<sockaddr*>(&to), sizeof to);
  }
  for (const std::string& peer : options_.unicast_peers) {
    const net::Endpoint e = peer.find(':') == std::string::npos ? net::Endpoint{peer, options_.port}
                                                                 : net::parse_endpoint(peer, "cluster peer");
    sockaddr_in p{};
    p.sin_family = AF_INET;
    p.sin_port = htons(e.port);
    if (::inet_pton(AF_INET, e.host.c_str(), &p.sin_addr) != 1) continue;  // checked when the agent starts
    ::sendto(fd_.get(), datagram.data(), datagram.size(), MSG_DONTWAIT, reinterpret_cast<sockaddr*>(&p), sizeof p);
  }
}

std::optional<Received> Beacon::receive(std::chrono::milliseconds wait) {
  pollfd p{fd_.get(), POLLIN, 0};
  const int ready = ::poll(&p, 1, static_cast<int>(wait.count()));
  if (ready <= 0) return std::nullopt;
  char buf[2048];
  char control[256];
  sockaddr_in from{};
  iovec iov{buf, sizeof buf};
  msghdr msg{};
  msg.msg_name = &from;
  msg.msg_namelen = sizeof from;
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  const ssize_t n = ::recvmsg(fd_.get(), &msg, MSG_DONTWAIT);
  if (n < 0) return std::nullopt;
  Received r;
  // A datagram cut short by the buffer is longer than any announcement: keep it whole-sized so
  // the decoder refuses it by length.
  r.datagram.assign(buf, static_cast<size_t>(n));
  if (msg.msg_flags & MSG_TRUNC) r.datagram.append(1, '\0');
  char text[INET_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET, &from.sin_addr, text, sizeof text);
  r.from = text;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != IPPROTO_IP || c->cmsg_type != IP_PKTINFO) continue;
    in_pktinfo info{};
    std::memcpy(&info, CMSG_DATA(c), sizeof info);
    // The interface it arrived on, by index: its address as this beacon announces it.
    char name[IF_NAMESIZE] = {};
    if (::if_indextoname(static_cast<unsigned>(info.ipi_ifindex), name))
      for (const BeaconInterface& i : joined_)
        if (i.name == name) r.local = i.address;
    if (r.local.empty()) {  // not one announced on (a unicast peer's datagram, say)
      ::inet_ntop(AF_INET, &info.ipi_spec_dst, text, sizeof text);
      r.local = text;
    }
  }
  return r;
}

}  // namespace orchard::dist::discovery
