// FreePort: ports for tandem local's children come from below the kernel's ephemeral range (where
// no outgoing connection or bind(0) can take them first), are free when handed out, and vary.
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

bool CanListen(uint16_t port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(port);
  const bool ok = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 && listen(fd, 1) == 0;
  close(fd);
  return ok;
}

TEST(FreePortTest, PortsComeFromBelowTheEphemeralRangeAndAreFree) {
  const int ephemeral = EphemeralStart();
  std::set<uint16_t> seen;
  for (int i = 0; i < 50; ++i) {
    StatusOr<uint16_t> port = FreePort();
    ASSERT_TRUE(port.ok()) << port.status().ToString();
    if (ephemeral - 10000 >= 1000) {
      EXPECT_GE(*port, 10000);
      EXPECT_LT(*port, ephemeral);
    }
    EXPECT_TRUE(CanListen(*port)) << *port;
    seen.insert(*port);
  }
  EXPECT_GT(seen.size(), 40u);  // random picks, not one port handed out again and again
}

TEST(FreePortTest, AHeldPortIsNotHandedOut) {
  // Hold every port FreePort gives for a while: none comes back while held.
  std::set<uint16_t> held_ports;
  std::vector<int> fds;
  for (int i = 0; i < 30; ++i) {
    StatusOr<uint16_t> port = FreePort();
    ASSERT_TRUE(port.ok());
    EXPECT_EQ(held_ports.count(*port), 0u) << *port << " handed out while held";
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(*port);
    ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    ASSERT_EQ(listen(fd, 1), 0);
    fds.push_back(fd);
    held_ports.insert(*port);
  }
  for (int fd : fds) close(fd);
}

}  // namespace
}  // namespace tandem::tools
