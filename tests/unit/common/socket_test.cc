// SPDX-License-Identifier: Apache-2.0
// Tests for common/socket.h: NCCL_SOCKET_IFNAME matching and interface selection as pure functions over fake
// interface lists, address parsing, and bounded loopback I/O.
#include "common/socket.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "../../free_port.h"

namespace cfx::net {
namespace {

using std::chrono::milliseconds;

sockaddr_storage ip(const char* text) {
  sockaddr_storage s{};
  if (inet_pton(AF_INET, text, &reinterpret_cast<sockaddr_in&>(s).sin_addr) == 1) {
    s.ss_family = AF_INET;
  } else if (inet_pton(AF_INET6, text, &reinterpret_cast<sockaddr_in6&>(s).sin6_addr) == 1) {
    s.ss_family = AF_INET6;
  }
  return s;
}

Interface itf(const char* name, const char* addr, const char* mask) { return Interface{name, ip(addr), ip(mask)}; }

std::vector<std::string> names(const std::vector<Interface>& v) {
  std::vector<std::string> out;
  for (const auto& i : v) out.push_back(i.name);
  return out;
}

std::vector<std::string> select(const std::vector<Interface>& all, const std::string& ifName, int family = AF_UNSPEC,
                                size_t maxCount = 8) {
  InterfaceQuery q;
  q.ifName = ifName;
  q.family = family;
  q.maxCount = maxCount;
  return names(selectInterfaces(all, q));
}

TEST(IfNameFilterTest, PrefixesExcludesAndExactNamesFollowNcclGrammar) {
  EXPECT_TRUE(IfNameFilter::parse("eth").matches("eth0"));
  EXPECT_TRUE(IfNameFilter::parse("eth,ib").matches("ib1"));
  EXPECT_FALSE(IfNameFilter::parse("eth,ib").matches("enp3s0"));
  EXPECT_FALSE(IfNameFilter::parse("^docker,lo").matches("docker0"));
  EXPECT_FALSE(IfNameFilter::parse("^docker,lo").matches("lo"));
  EXPECT_TRUE(IfNameFilter::parse("^docker,lo").matches("eth0"));
  EXPECT_TRUE(IfNameFilter::parse("=eth0").matches("eth0"));
  EXPECT_FALSE(IfNameFilter::parse("=eth0").matches("eth01"));
  EXPECT_FALSE(IfNameFilter::parse("^=docker0").matches("docker0"));
  EXPECT_TRUE(IfNameFilter::parse("^=docker0").matches("docker01"));
  EXPECT_TRUE(IfNameFilter::parse("eth0:5000").matches("eth0"));  // a port suffix is accepted and ignored
  EXPECT_TRUE(IfNameFilter::parse("").matches("anything"));
  EXPECT_TRUE(IfNameFilter::parse("^").matches("anything"));
}

TEST(SelectInterfacesTest, AutoSkipsDockerLoopbackAndVirbrWhenSomethingElseExists) {
  const std::vector<Interface> all = {itf("lo", "127.0.0.1", "255.0.0.0"), itf("docker0", "172.17.0.1", "255.255.0.0"),
                                      itf("virbr0", "192.168.122.1", "255.255.255.0"),
                                      itf("eth0", "10.0.0.5", "255.255.255.0"), itf("eno1", "10.1.0.5", "255.255.0.0")};
  EXPECT_EQ(select(all, ""), (std::vector<std::string>{"eth0", "eno1"}));
  EXPECT_EQ(select(all, "", AF_UNSPEC, 1), (std::vector<std::string>{"eth0"}));
}

TEST(SelectInterfacesTest, AutoFallsBackToDockerThenLoopbackThenVirbr) {
  EXPECT_EQ(select({itf("lo", "127.0.0.1", "255.0.0.0"), itf("docker0", "172.17.0.1", "255.255.0.0")}, ""),
            (std::vector<std::string>{"docker0"}));
  EXPECT_EQ(select({itf("virbr0", "192.168.122.1", "255.255.255.0"), itf("lo", "127.0.0.1", "255.0.0.0")}, ""),
            (std::vector<std::string>{"lo"}));
  EXPECT_EQ(select({itf("virbr0", "192.168.122.1", "255.255.255.0")}, ""), (std::vector<std::string>{"virbr0"}));
  EXPECT_TRUE(select({}, "").empty());
}

TEST(SelectInterfacesTest, AutoPrefersIbThenTheSubnetOfTheRendezvousAddress) {
  const std::vector<Interface> all = {itf("eth0", "10.0.0.5", "255.255.255.0"), itf("eth1", "10.9.0.5", "255.255.0.0"),
                                      itf("ib0", "192.168.1.5", "255.255.255.0")};
  EXPECT_EQ(select(all, ""), (std::vector<std::string>{"ib0"}));
  const std::vector<Interface> noIb(all.begin(), all.begin() + 2);
  InterfaceQuery q;
  q.reachable = ip("10.9.3.3");
  EXPECT_EQ(names(selectInterfaces(noIb, q)), (std::vector<std::string>{"eth1"}));
  q.reachable = ip("8.8.8.8");  // no subnet holds it: the generic rule applies
  EXPECT_EQ(names(selectInterfaces(noIb, q)), (std::vector<std::string>{"eth0"}));
  q.reachable = ip("127.0.0.1");
  EXPECT_EQ(names(selectInterfaces({itf("eth0", "10.0.0.5", "255.255.255.0"), itf("lo", "127.0.0.1", "255.0.0.0")}, q)),
            (std::vector<std::string>{"lo"}));
}

TEST(SelectInterfacesTest, UserListDecidesAlone) {
  const std::vector<Interface> all = {itf("lo", "127.0.0.1", "255.0.0.0"), itf("docker0", "172.17.0.1", "255.255.0.0"),
                                      itf("eth0", "10.0.0.5", "255.255.255.0"),
                                      itf("eth10", "10.0.1.5", "255.255.255.0")};
  EXPECT_EQ(select(all, "lo"), (std::vector<std::string>{"lo"}));
  EXPECT_EQ(select(all, "docker"), (std::vector<std::string>{"docker0"}));
  EXPECT_EQ(select(all, "eth"), (std::vector<std::string>{"eth0", "eth10"}));
  EXPECT_EQ(select(all, "=eth1"), (std::vector<std::string>{}));
  EXPECT_EQ(select(all, "^eth,lo"), (std::vector<std::string>{"docker0"}));
  EXPECT_EQ(select(all, "^=eth0"), (std::vector<std::string>{"lo", "docker0", "eth10"}));
}

TEST(SelectInterfacesTest, FamilyFiltersAndOneAddressPerNameWithIpv4First) {
  const std::vector<Interface> all = {itf("eth0", "10.0.0.5", "255.255.255.0"),
                                      itf("eth0", "fd00::5", "ffff:ffff:ffff:ffff::"),
                                      itf("eth1", "fd01::5", "ffff:ffff:ffff:ffff::")};
  const std::vector<Interface> any = selectInterfaces(all, InterfaceQuery{"", AF_UNSPEC, std::nullopt, 8});
  ASSERT_EQ(names(any), (std::vector<std::string>{"eth0", "eth1"}));
  EXPECT_EQ(any[0].addr.ss_family, AF_INET);
  const std::vector<Interface> v6 = selectInterfaces(all, InterfaceQuery{"", AF_INET6, std::nullopt, 8});
  ASSERT_EQ(names(v6), (std::vector<std::string>{"eth0", "eth1"}));
  EXPECT_EQ(v6[0].addr.ss_family, AF_INET6);
  EXPECT_EQ(select(all, "", AF_INET), (std::vector<std::string>{"eth0"}));
}

Interface scoped(const char* name, const char* addr, const char* mask, uint32_t scope) {
  Interface i = itf(name, addr, mask);
  reinterpret_cast<sockaddr_in6&>(i.addr).sin6_scope_id = scope;
  return i;
}

TEST(SelectInterfacesTest, EachNamePrefersIpv4ThenGlobalThenLinkLocalThenLoopbackIpv6) {
  // The system lists addresses in any order; the choice must not depend on it.
  const std::vector<Interface> all = {itf("lo", "::1", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"),
                                      scoped("eth0", "fe80::5", "ffff:ffff:ffff:ffff::", 2),
                                      itf("lo", "127.0.0.1", "255.0.0.0"),
                                      itf("eth0", "fd00::5", "ffff:ffff:ffff:ffff::"),
                                      scoped("veth1", "fe80::9", "ffff:ffff:ffff:ffff::", 7),
                                      itf("eth0", "10.0.0.5", "255.255.255.0")};
  auto only = [&](const std::string& ifName, int family) {
    InterfaceQuery q;
    q.ifName = ifName;
    q.family = family;
    q.maxCount = 8;
    std::vector<std::string> out;
    for (const Interface& i : selectInterfaces(all, q)) out.push_back(i.name + "=" + ipToString(i.addr));
    return out;
  };
  EXPECT_EQ(only("", AF_UNSPEC), (std::vector<std::string>{"eth0=10.0.0.5", "veth1=fe80::9%7"}));
  EXPECT_EQ(only("", AF_INET6), (std::vector<std::string>{"eth0=fd00::5", "veth1=fe80::9%7"}));
  EXPECT_EQ(only("lo", AF_UNSPEC), (std::vector<std::string>{"lo=127.0.0.1"}));
  EXPECT_EQ(only("lo", AF_INET6), (std::vector<std::string>{"lo=::1"}));
  EXPECT_EQ(only("=veth1", AF_INET), (std::vector<std::string>{}));
  EXPECT_EQ(only("^eth", AF_INET6), (std::vector<std::string>{"lo=::1", "veth1=fe80::9%7"}));
  // The link-local address keeps its scope, so it can be bound and connected to.
  InterfaceQuery q;
  q.ifName = "veth";
  const std::vector<Interface> v = selectInterfaces(all, q);
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(reinterpret_cast<const sockaddr_in6&>(v[0].addr).sin6_scope_id, 7u);
}

TEST(SelectInterfacesTest, AutoModeStillPrefersAnythingOverLoopbackForIpv6) {
  const std::vector<Interface> all = {itf("lo", "::1", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"),
                                      itf("lo", "127.0.0.1", "255.0.0.0"),
                                      scoped("eth0", "fe80::5", "ffff:ffff:ffff:ffff::", 2)};
  EXPECT_EQ(select(all, "", AF_INET6, 1), (std::vector<std::string>{"eth0"}));
  EXPECT_EQ(select(all, "", AF_INET, 1), (std::vector<std::string>{"lo"}));
  EXPECT_EQ(select({itf("lo", "::1", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff")}, "", AF_INET6, 1),
            (std::vector<std::string>{"lo"}));
}

TEST(SelectInterfacesTest, ExcludeAndExactMatchCombineWithCommaLists) {
  const std::vector<Interface> all = {itf("eth0", "10.0.0.5", "255.255.255.0"),
                                      itf("eth1", "10.0.1.5", "255.255.255.0"), itf("ib0", "10.1.0.5", "255.255.255.0"),
                                      itf("ib10", "10.1.1.5", "255.255.255.0"),
                                      itf("docker0", "172.17.0.1", "255.255.0.0")};
  EXPECT_EQ(select(all, "=eth1,ib10"), (std::vector<std::string>{"eth1", "ib10"}));
  EXPECT_EQ(select(all, "^=ib1,eth0,docker0"), (std::vector<std::string>{"eth1", "ib0", "ib10"}));
  EXPECT_EQ(select(all, "^ib,docker"), (std::vector<std::string>{"eth0", "eth1"}));
  EXPECT_EQ(select(all, "ib1"), (std::vector<std::string>{"ib10"}));
  EXPECT_EQ(select(all, "eth", AF_UNSPEC, 1), (std::vector<std::string>{"eth0"}));
  EXPECT_EQ(select(all, "", AF_UNSPEC, 8), (std::vector<std::string>{"ib0", "ib10"})) << "ib first when unset";
}

TEST(AddressTest, LinkLocalAddressesPrintAndParseWithTheirZone) {
  Result<sockaddr_storage> a = parseAddress("[fe80::1%lo]:5000");
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_NE(reinterpret_cast<const sockaddr_in6&>(*a).sin6_scope_id, 0u);
  EXPECT_EQ(addressToString(*a), "[fe80::1%lo]:5000");
  EXPECT_EQ(ipToString(ip("fe80::1")), "fe80::1") << "no zone, nothing appended";
}

TEST(AddressTest, ParsesIpv4Ipv6AndHostNames) {
  Result<sockaddr_storage> a = parseAddress("127.0.0.1:1234");
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_EQ(addressToString(*a), "127.0.0.1:1234");
  Result<sockaddr_storage> b = parseAddress("[::1]:80");
  ASSERT_TRUE(b.ok()) << b.status().message();
  EXPECT_EQ(addressToString(*b), "[::1]:80");
  EXPECT_TRUE(isLoopback(*b));
  Result<sockaddr_storage> c = parseAddress("localhost:99");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_TRUE(isLoopback(*c));
  EXPECT_EQ(addressPort(*c), 99);
}

TEST(AddressTest, RejectsMalformedText) {
  for (const char* bad : {"1.2.3.4", "::1:80", "[::1]80", "[::1]:", "host:abc", "host:70000", ":80", "[::1"}) {
    Result<sockaddr_storage> r = parseAddress(bad);
    EXPECT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), Errc::InvalidArgument) << bad;
  }
  EXPECT_FALSE(parseAddress("no-such-host.invalid:80").ok());
}

TEST(AddressTest, SubnetAndEquality) {
  EXPECT_TRUE(inSubnet(ip("10.0.0.7"), ip("10.0.0.1"), ip("255.255.255.0")));
  EXPECT_FALSE(inSubnet(ip("10.0.1.7"), ip("10.0.0.1"), ip("255.255.255.0")));
  EXPECT_FALSE(inSubnet(ip("fd00::1"), ip("10.0.0.1"), ip("255.255.255.0")));
  sockaddr_storage x = ip("10.0.0.1");
  sockaddr_storage y = ip("10.0.0.1");
  setAddressPort(x, 5);
  EXPECT_FALSE(sameAddress(x, y));
  setAddressPort(y, 5);
  EXPECT_TRUE(sameAddress(x, y));
}

// A listener on 127.0.0.1 and one connected pair.
struct Pair {
  Listener listener;
  Socket client;
  Socket server;
};

Pair connectPair() {
  Pair p;
  Result<Listener> l = Listener::listen(ip("127.0.0.1"));
  EXPECT_TRUE(l.ok()) << l.status().message();
  p.listener = std::move(*l);
  Result<Socket> c = Socket::connect(p.listener.address(), {}, Deadline(milliseconds(5000)), nullptr);
  EXPECT_TRUE(c.ok()) << c.status().message();
  p.client = std::move(*c);
  Result<Socket> s = p.listener.accept(Deadline(milliseconds(5000)), nullptr);
  EXPECT_TRUE(s.ok()) << s.status().message();
  p.server = std::move(*s);
  return p;
}

TEST(SocketTest, SendAllAndRecvAllMoveLargeBuffers) {
  Pair p = connectPair();
  std::vector<uint8_t> out(8 << 20);
  for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<uint8_t>(i * 7);
  std::vector<uint8_t> in(out.size());
  std::thread sender(
      [&] { EXPECT_TRUE(p.client.sendAll(out.data(), out.size(), Deadline(milliseconds(20000)), nullptr).ok()); });
  ASSERT_TRUE(p.server.recvAll(in.data(), in.size(), Deadline(milliseconds(20000)), nullptr).ok());
  sender.join();
  EXPECT_EQ(in, out);
}

TEST(SocketTest, RecvAllTimesOutInsteadOfHanging) {
  Pair p = connectPair();
  uint8_t b[4];
  Status st = p.server.recvAll(b, sizeof(b), Deadline(milliseconds(100)), nullptr);
  EXPECT_EQ(st.code(), Errc::Timeout);
  EXPECT_NE(st.message().find("127.0.0.1"), std::string::npos) << st.message();
}

TEST(SocketTest, AbortFlagUnblocksRecvAll) {
  Pair p = connectPair();
  std::atomic<bool> abortFlag{false};
  std::thread aborter([&] {
    std::this_thread::sleep_for(milliseconds(100));
    abortFlag.store(true);
  });
  uint8_t b[4];
  Status st = p.server.recvAll(b, sizeof(b), Deadline(milliseconds(30000)), &abortFlag);
  aborter.join();
  EXPECT_EQ(st.code(), Errc::RemoteError);
  EXPECT_NE(st.message().find("aborted"), std::string::npos) << st.message();
}

TEST(SocketTest, PeerCloseIsRemoteErrorNamingThePeer) {
  Pair p = connectPair();
  const uint8_t two[2] = {1, 2};
  ASSERT_TRUE(p.client.sendAll(two, 2, Deadline(milliseconds(5000)), nullptr).ok());
  p.client.close();
  uint8_t b[4];
  Status st = p.server.recvAll(b, sizeof(b), Deadline(milliseconds(5000)), nullptr);
  EXPECT_EQ(st.code(), Errc::RemoteError);
  EXPECT_NE(st.message().find("closed by remote peer 127.0.0.1:"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("2 of 4 bytes received"), std::string::npos) << st.message();
}

TEST(SocketTest, ConnectRetriesRefusedThenReportsTheAddress) {
  // Nothing listens there.
  const sockaddr_storage addr = *parseAddress("127.0.0.1:" + std::to_string(testports::freeLoopbackPort()));
  Result<Socket> s = Socket::connect(addr, {2, milliseconds(10)}, Deadline(milliseconds(5000)), nullptr);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), Errc::RemoteError);
  EXPECT_NE(s.status().message().find(addressToString(addr)), std::string::npos) << s.status().message();
  EXPECT_NE(s.status().message().find("3 attempt"), std::string::npos) << s.status().message();
}

TEST(SocketTest, ConnectSucceedsWhenTheListenerAppearsDuringRetries) {
  const sockaddr_storage addr = *parseAddress("127.0.0.1:" + std::to_string(testports::freeLoopbackPort()));
  std::thread late([&] {
    std::this_thread::sleep_for(milliseconds(150));
    Result<Listener> l = Listener::listen(addr);
    ASSERT_TRUE(l.ok()) << l.status().message();
    EXPECT_TRUE(l->accept(Deadline(milliseconds(10000)), nullptr).ok());
  });
  Result<Socket> s = Socket::connect(addr, {200, milliseconds(20)}, Deadline(milliseconds(10000)), nullptr);
  late.join();
  EXPECT_TRUE(s.ok()) << s.status().message();
}

TEST(SocketTest, AcceptHonoursDeadlineAndAbort) {
  Result<Listener> l = Listener::listen(ip("127.0.0.1"));
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(l->accept(Deadline(milliseconds(50)), nullptr).status().code(), Errc::Timeout);
  std::atomic<bool> abortFlag{true};
  EXPECT_EQ(l->accept(Deadline(milliseconds(30000)), &abortFlag).status().code(), Errc::RemoteError);
}

TEST(SocketTest, FindInterfaceReportsWhatExistsWhenNothingMatches) {
  InterfaceQuery q;
  q.ifName = "=no-such-interface";
  Result<Interface> r = findInterface(q);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("no socket interface found"), std::string::npos);
  EXPECT_TRUE(findInterface(InterfaceQuery{}).ok());
}

}  // namespace
}  // namespace cfx::net
