// PortReservations: the ports tandem local hands its agents are held until the agents listen on
// them, so nobody else (another stack starting at the same time, bind(0), an outgoing connection)
// can take one meanwhile, while the agent's own listener (SO_REUSEADDR) binds it alongside.
#include "tools/local_support.h"

#include <fstream>
#include <set>

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace tandem::tools {
namespace {

int EphemeralStart() {
  std::ifstream in("/proc/sys/net/ipv4/ip_local_port_range");
  int lo = 0, hi = 0;
  return in >> lo >> hi && lo > 0 ? lo : 32768;
}

// A socket bound to the loopback port (SO_REUSEADDR when `reuse`, listening when `listen_too`);
// -1 when the bind or listen failed.
int Bind(uint16_t port, bool reuse, bool listen_too) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  const int one = 1;
  if (reuse) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(port);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || (listen_too && listen(fd, 1) != 0)) {
    close(fd);
    return -1;
  }
  return fd;
}

TEST(PortReservationsTest, HeldPortsAreTakenByTheirListenerAndNobodyElse) {
  const int ephemeral = EphemeralStart();
  PortReservations ports, other;
  std::set<uint16_t> held;
  for (int i = 0; i < 40; ++i) {
    StatusOr<uint16_t> port = ports.Reserve();
    ASSERT_TRUE(port.ok()) << port.status().ToString();
    if (ephemeral - 10000 >= 1000) {
      EXPECT_GE(*port, 10000);
      EXPECT_LT(*port, ephemeral);
    }
    EXPECT_TRUE(held.insert(*port).second) << *port << " reserved twice";
  }
  EXPECT_EQ(ports.held(), 40u);
  // Another stack's reservations never get one of them.
  for (int i = 0; i < 40; ++i) {
    StatusOr<uint16_t> port = other.Reserve();
    ASSERT_TRUE(port.ok());
    EXPECT_EQ(held.count(*port), 0u) << *port << " reserved by two stacks";
  }
  std::vector<int> listeners;
  for (uint16_t port : held) {
    EXPECT_EQ(Bind(port, /*reuse=*/false, false), -1) << port << ": a plain bind got a held port";
    const int fd = Bind(port, /*reuse=*/true, /*listen_too=*/true);  // what the agent does
    EXPECT_GE(fd, 0) << port << ": the child could not listen on its reserved port";
    listeners.push_back(fd);
  }
  ports.ReleaseAll();
  EXPECT_EQ(ports.held(), 0u);
  for (int fd : listeners) {
    if (fd >= 0) close(fd);
  }
  // Released and closed: free again.
  for (uint16_t port : held) {
    const int fd = Bind(port, /*reuse=*/true, false);
    EXPECT_GE(fd, 0) << port << " still held after ReleaseAll";
    if (fd >= 0) close(fd);
  }
}

}  // namespace
}  // namespace tandem::tools
