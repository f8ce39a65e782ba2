"""Hosts on one machine: network namespaces
(`ip netns`) joined by veth pairs to a bridge in the root namespace.

Each host is a namespace with its own loopback and one veth whose other end sits on the bridge; the bridge
holds the subnet's first address, so servers of the root namespace (the S3 front, the REST catalog, reached
through `testbed/netns_relay.py`) are at `Network.gateway` from every host. All addresses are a private /24 of
this machine: nothing leaves it.

Faults act on a host's veth end on the bridge side (the host cannot undo them):
- `cut(host)`: the link down (`ip link set ... down`):
  every packet to and from the host is lost until `restore`;
- `shape(host, ...)`: a slow, lossy link with `tbf` in both directions. The kernels these tests run on have no
  `sch_netem` (`tc qdisc add ... netem` answers "Specified qdisc kind is unknown", and there is no modprobe),
  so netem's delay and random loss are not available. A token bucket of a small rate with a short queue does
  both for real traffic, in the kernel: packets wait their turn (queueing delay, up to `latency`) and those
  that would wait longer are dropped (tail drop; `tc -s qdisc` counts them, `Network.drops`), so TCP sees loss
  and retransmits. The loss is load-dependent rather than random, which is what a congested link does.

Names carry a per-process tag so that two runs never share a namespace or an interface; `teardown` kills every
process left in the namespaces (`ip netns pids`),
then deletes the namespaces and the bridge, and never raises.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field

__all__ = ["Host", "Network", "unavailable"]


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check)


def unavailable() -> str | None:
    """Why hosts in network namespaces cannot be made here (not root, no `ip`,
    namespaces refused), or None."""
    if shutil.which("ip") is None or shutil.which("tc") is None:
        return "iproute2 (`ip`, `tc`) is not installed"
    if os.geteuid() != 0:
        return "network namespaces need root (`ip netns add`)"
    probe = f"lsprobe{os.getpid()}"
    done = _ip("netns", "add", probe, check=False)
    if done.returncode != 0:
        return f"`ip netns add` is not permitted here: {done.stderr.strip()}"
    _ip("netns", "del", probe, check=False)
    return None


@dataclass(frozen=True)
class Host:
    name: str  # the role: "master", "w1", ...
    netns: str
    address: str
    outer: str  # the veth end on the bridge (root namespace): faults act here
    inner: str  # the veth end inside the namespace


@dataclass
class Network:
    """A bridge with one subnet, and hosts added to it (`add`); `teardown` removes all of it."""

    tag: str = field(default_factory=lambda: f"{os.getpid() % 100000:05d}")
    subnet: int = field(default_factory=lambda: 100 + os.getpid() % 150)  # 10.231.<subnet>.0/24
    hosts: dict[str, Host] = field(default_factory=dict)
    bridge: str = ""

    def __post_init__(self) -> None:
        self.bridge = f"lsbr{self.tag}"

    @property
    def gateway(self) -> str:
        return f"10.231.{self.subnet}.1"

    def up(self) -> Network:
        _ip("link", "add", self.bridge, "type", "bridge")
        _ip("addr", "add", f"{self.gateway}/24", "dev", self.bridge)
        _ip("link", "set", self.bridge, "up")
        return self

    def add(self, name: str) -> Host:
        index = len(self.hosts) + 2
        host = Host(name, f"ls{self.tag}{name}", f"10.231.{self.subnet}.{index}", f"lso{self.tag}{index}",
                    f"lsi{self.tag}{index}")
        self.hosts[name] = host  # before the commands: teardown removes what was half made
        _ip("netns", "add", host.netns)
        _ip("link", "add", host.outer, "type", "veth", "peer", "name", host.inner)
        _ip("link", "set", host.inner, "netns", host.netns)
        _ip("link", "set", host.outer, "master", self.bridge, "up")
        _ip("-n", host.netns, "addr", "add", f"{host.address}/24", "dev", host.inner)
        _ip("-n", host.netns, "link", "set", host.inner, "up")
        _ip("-n", host.netns, "link", "set", "lo", "up")
        return host

    def command(self, name: str, argv: list[str]) -> list[str]:
        """`argv` run on host `name` (in its namespace; same files, same process table)."""
        return ["ip", "netns", "exec", self.hosts[name].netns, *argv]

    # ---- faults ------------------------------------------------------------------------------------------

    def cut(self, name: str) -> None:
        _ip("link", "set", self.hosts[name].outer, "down")

    def restore(self, name: str) -> None:
        _ip("link", "set", self.hosts[name].outer, "up")

    def shape(self, name: str, *, rate: str = "4mbit", burst: str = "16kb", latency: str = "40ms") -> None:
        """A slow, lossy link (see the module's note: tbf, since netem is not available), both directions."""
        host = self.hosts[name]
        spec = ["tbf", "rate", rate, "burst", burst, "latency", latency]
        subprocess.run(["tc", "qdisc", "replace", "dev", host.outer, "root", *spec], check=True,
                       capture_output=True)
        subprocess.run(["ip", "netns", "exec", host.netns, "tc", "qdisc", "replace", "dev", host.inner,
                        "root", *spec], check=True, capture_output=True)

    def unshape(self, name: str) -> None:
        host = self.hosts[name]
        subprocess.run(["tc", "qdisc", "del", "dev", host.outer, "root"], capture_output=True, check=False)
        subprocess.run(["ip", "netns", "exec", host.netns, "tc", "qdisc", "del", "dev", host.inner, "root"],
                       capture_output=True, check=False)

    def drops(self, name: str) -> tuple[int, int]:
        """(packets sent, packets dropped) by the shaping on both ends of the host's link:
        the evidence of loss."""
        host = self.hosts[name]
        total = [0, 0]
        for cmd in (["tc", "-s", "qdisc", "show", "dev", host.outer],
                    ["ip", "netns", "exec", host.netns, "tc", "-s", "qdisc", "show", "dev", host.inner]):
            out = subprocess.run(cmd, capture_output=True, text=True, check=False).stdout
            for line in out.splitlines():
                words = line.replace("(", " ").replace(",", " ").split()
                if words[:1] == ["Sent"] and "dropped" in words:
                    total[0] += int(words[3])
                    total[1] += int(words[words.index("dropped") + 1])
        return total[0], total[1]

    # ---- teardown ----------------------------------------------------------------------------------------

    def pids(self) -> list[int]:
        found: list[int] = []
        for host in self.hosts.values():
            done = _ip("netns", "pids", host.netns, check=False)
            found += [int(p) for p in done.stdout.split()]
        return found

    def teardown(self) -> None:
        """Kill what still runs in the namespaces, delete them and the bridge. Never raises."""
        for _ in range(20):
            pids = self.pids()
            if not pids:
                break
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.25)
        for host in self.hosts.values():
            _ip("link", "del", host.outer, check=False)  # removes its peer too
            _ip("netns", "del", host.netns, check=False)
        _ip("link", "del", self.bridge, check=False)
        self.hosts.clear()
