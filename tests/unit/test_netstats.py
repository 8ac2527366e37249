"""ccc_netstats: the procfs parsers on real lines (kept verbatim from a Linux 6.x host and from
a Docker container's namespace), the interface of a network, the SSH sessions, the PID-reuse
guard on a crafted ``proc_root``, and the parsers on this machine's own /proc."""

import os
import socket
import tracemalloc

import ccc_netstats
import pytest

CONTAINER_ID = "ab" * 32
OTHER_ID = "cd" * 32

# /proc/<pid>/net/dev of a container on two Docker networks (eth0 lab, eth1 claims).
DEV = """\
Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo:     420       6    0    0    0     0          0         0      420       6    0    0    0     0       0          0
  eth0: 5265937    3812    0    0    0     0          0         0 10494262    7493    0    0    0     0       0          0
  eth1:    1866      21    0    0    0     0          0         0      726       9    0    0    0     0       0          0
"""
ROUTE = """\
Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT
eth0\t00000000\t0101E80A\t0003\t0\t0\t0\t00000000\t0\t0\t0
eth0\t0001E80A\t00000000\t0001\t0\t0\t0\tC0FFFFFF\t0\t0\t0
eth1\t8001E80A\t00000000\t0001\t0\t0\t0\tC0FFFFFF\t0\t0\t0
"""
# sshd listening; two sessions in (from frpc 10.232.1.2 and the gateway); the container's own
# outgoing ssh to another host (remote port 22: not a session into it); a closed one.
TCP = """\
  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000:0016 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 2301851 1 0000000000000000 100 0 0 10 0
   1: 0301E80A:0016 0201E80A:D6C2 01 00000000:00000000 02:000A3D6D 00000000     0        0 2302912 2 0000000000000000 20 4 30 10 -1
   2: 0301E80A:0016 0101E80A:9A3C 01 00000000:00000000 02:000A1B2C 00000000     0        0 2303015 2 0000000000000000 20 4 30 10 -1
   3: 0301E80A:B5A8 0A00A8C0:0016 01 00000000:00000000 00:00000000 00000000  1000        0 2305120 1 0000000000000000 20 4 29 10 -1
   4: 0301E80A:0016 0201E80A:C001 06 00000000:00000000 03:00000D5F 00000000     0        0 0 3 0000000000000000
"""
# An IPv4-mapped session on a dual-stack sshd, and a native IPv6 one.
TCP6 = """\
  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000000000000:0016 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 2301853 1 0000000000000000 100 0 0 10 0
   1: 0000000000000000FFFF00000301E80A:0016 0000000000000000FFFF00000201E80A:E0A4 01 00000000:00000000 02:000A3D6D 00000000     0        0 2306001 2 0000000000000000 20 4 30 10 -1
   2: 000080FE00000000FF0000020300E5FE:0016 000080FE00000000FF0000020100E5FE:C350 01 00000000:00000000 02:000A3D6D 00000000     0        0 2306002 2 0000000000000000 20 4 30 10 -1
"""


def test_dev_counters_per_interface():
    counters = ccc_netstats.parse_dev(DEV)
    assert set(counters) == {"lo", "eth0", "eth1"}
    assert counters["eth0"] == {"rx_bytes": 5265937, "rx_packets": 3812, "tx_bytes": 10494262, "tx_packets": 7493}


def test_route_decodes_addresses_in_host_byte_order():
    routes = ccc_netstats.parse_route(ROUTE)
    assert routes[0] == {"interface": "eth0", "destination": "0.0.0.0", "gateway": "10.232.1.1", "mask": "0.0.0.0"}
    assert routes[2] == {"interface": "eth1", "destination": "10.232.1.128", "gateway": "0.0.0.0",
                         "mask": "255.255.255.192"}


@pytest.mark.parametrize("address, prefix, interface", [
    ("10.232.1.3", 26, "eth0"), ("10.232.1.130", 26, "eth1"),
    ("10.232.1.3", 24, None),      # another subnet size: not this route
    ("10.99.0.2", 26, None), ("", 26, None), ("10.232.1.3", None, None),
])
def test_interface_is_the_connected_route_of_the_network(address, prefix, interface):
    assert ccc_netstats.interface_of(ccc_netstats.parse_route(ROUTE), address, prefix) == interface


def test_ssh_sessions_are_established_connections_to_local_port_22():
    peers = ccc_netstats.sessions_to_port(TCP.splitlines() + TCP6.splitlines())
    assert peers == ["10.232.1.2:54978", "10.232.1.1:39484", "10.232.1.2:57508", "[fe80::200:ff:fee5:1]:50000"]
    assert ccc_netstats.sessions_to_port(["garbage", "", "  sl  local_address"]) == []


def _fake_process(proc_root, pid, container_id=CONTAINER_ID, tcp=TCP):
    """A crafted /proc/<pid> (a FAKE of procfs: the files the reader opens, with real content)."""
    net = proc_root / str(pid) / "net"
    net.mkdir(parents=True)
    (proc_root / str(pid) / "cgroup").write_text(f"0::/system.slice/docker-{container_id}.scope\n")
    (net / "dev").write_text(DEV)
    (net / "route").write_text(ROUTE)
    (net / "tcp").write_text(tcp)


def _attrs(pid=4242, started="2024-05-01T10:00:00.1Z", running=True):
    return {"Id": CONTAINER_ID, "Name": "/ana-main", "State": {"Running": running, "Pid": pid, "StartedAt": started},
            "NetworkSettings": {"Networks": {
                "lab-unrestricted": {"IPAddress": "10.232.1.3", "IPPrefixLen": 26},
                "claims": {"IPAddress": "10.232.1.131", "IPPrefixLen": 26},
                "overlay-ana-main": {"IPAddress": ""}}}}


def test_container_usage_per_network_and_sessions(tmp_path):
    _fake_process(tmp_path, 4242)
    usage = ccc_netstats.container_usage(_attrs(), lambda: _attrs(), str(tmp_path))
    assert usage["networks"] == {
        "lab-unrestricted": {"interface": "eth0", "rx_bytes": 5265937, "rx_packets": 3812, "tx_bytes": 10494262,
                             "tx_packets": 7493},
        "claims": {"interface": "eth1", "rx_bytes": 1866, "rx_packets": 21, "tx_bytes": 726, "tx_packets": 9},
    }
    assert usage["ssh_peers"] == ["10.232.1.2:54978", "10.232.1.1:39484"]  # no tcp6 table: IPv4 only


@pytest.mark.parametrize("after", [
    None,                                                  # removed meanwhile
    _attrs(running=False),                                 # stopped
    _attrs(started="2024-05-01T11:00:00.1Z"),              # restarted (another run)
    _attrs(pid=4343),                                      # another process
])
def test_a_container_that_changed_while_read_is_not_reported(tmp_path, after):
    _fake_process(tmp_path, 4242)
    with pytest.raises(ccc_netstats.NetnsGone):
        ccc_netstats.container_usage(_attrs(), lambda: after, str(tmp_path))


def test_a_pid_reused_by_another_container_is_refused(tmp_path):
    _fake_process(tmp_path, 4242, container_id=OTHER_ID)
    with pytest.raises(ccc_netstats.NetnsGone, match="no longer the container's"):
        ccc_netstats.container_usage(_attrs(), lambda: _attrs(), str(tmp_path))


def test_a_vanished_or_stopped_process_is_refused(tmp_path):
    with pytest.raises(ccc_netstats.NetnsGone, match="gone"):
        ccc_netstats.container_usage(_attrs(), lambda: _attrs(), str(tmp_path))
    with pytest.raises(ccc_netstats.NetnsGone, match="not running"):
        ccc_netstats.container_usage(_attrs(running=False), lambda: _attrs(), str(tmp_path))


def test_parsers_on_this_machines_own_proc():
    """This process's real namespace: loopback counts, and the connected route of an address here."""
    with open("/proc/self/net/dev", encoding="ascii") as handle:
        counters = ccc_netstats.parse_dev(handle.read())
    assert counters["lo"]["rx_bytes"] >= 0 and counters["lo"]["tx_bytes"] >= 0
    with open("/proc/self/net/route", encoding="ascii") as handle:
        routes = ccc_netstats.parse_route(handle.read())
    connected = [r for r in routes if r["gateway"] == "0.0.0.0" and r["mask"] != "0.0.0.0"]
    assert connected, routes
    route = connected[0]
    prefix = bin(int.from_bytes(socket.inet_aton(route["mask"]), "big")).count("1")
    assert ccc_netstats.interface_of(routes, route["destination"], prefix) == route["interface"]
    # A live connection of this process to a listening socket here is found as established.
    with socket.create_server(("127.0.0.1", 0)) as server, socket.create_connection(server.getsockname()) as client:
        accepted, _ = server.accept()
        with accepted, open("/proc/self/net/tcp", encoding="ascii") as handle:
            lines = handle.read().splitlines()
        port = server.getsockname()[1]
        assert ccc_netstats.sessions_to_port(lines, port) == [f"127.0.0.1:{client.getsockname()[1]}"]


# ---------------------------------------------------------------------------------------------
# a connection table the user fills: read in chunks up to a bound, the cut reported


def _many(count, then=""):
    """``count`` connections that are not SSH sessions (listeners and other ports), then ``then``."""
    lines = [f"{n:6d}: 0301E80A:{1024 + n % 60000:04X} 0201E80A:9C40 {'0A' if n % 2 else '01'} 00000000:00000000 "
             f"00:00000000 00000000     0        0 {n + 1} 1 0000000000000000 20 4 30 10 -1" for n in range(count)]
    return TCP.splitlines()[0] + "\n" + "\n".join(lines) + "\n" + then


def test_a_long_table_is_read_only_up_to_the_bound_and_the_cut_is_reported(tmp_path):
    sessions = "".join(TCP.splitlines(keepends=True)[2:4])  # two SSH sessions, after everything else
    _fake_process(tmp_path, 4242, tcp=_many(100_000, then=sessions))
    size = (tmp_path / "4242" / "net" / "tcp").stat().st_size
    assert size > 6 * ccc_netstats.MAX_TCP_BYTES  # 100,000 sockets: 15 MiB
    tracemalloc.start()
    try:
        usage = ccc_netstats.container_usage(_attrs(), lambda: _attrs(), str(tmp_path))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert usage["ssh_peers_truncated"] is True and usage["ssh_peers"] == []  # a lower bound, said so
    assert peak < ccc_netstats.MAX_TCP_BYTES  # read whole, the table cost 19 MiB of Python objects


@pytest.mark.parametrize("chunk_edge", [0, 1, 7, 150])
def test_a_table_within_the_bound_is_read_whole_whatever_the_chunk_edges(tmp_path, chunk_edge, monkeypatch):
    text = _many(2_000 + chunk_edge, then="".join(TCP.splitlines(keepends=True)[1:]))
    monkeypatch.setattr(ccc_netstats, "_CHUNK", 4096 + chunk_edge)
    _fake_process(tmp_path, 4242, tcp=text)
    usage = ccc_netstats.container_usage(_attrs(), lambda: _attrs(), str(tmp_path))
    assert usage == dict(usage, ssh_peers=["10.232.1.2:54978", "10.232.1.1:39484"], ssh_peers_truncated=False)
    # exactly at the bound: whole, not cut
    fd = os.open(tmp_path / "4242", os.O_RDONLY)
    try:
        assert ccc_netstats.peers_at(fd, "net/tcp", limit=len(text.encode())) == (usage["ssh_peers"], False)
        assert ccc_netstats.peers_at(fd, "net/tcp", limit=len(text.encode()) - 1)[1] is True
    finally:
        os.close(fd)
