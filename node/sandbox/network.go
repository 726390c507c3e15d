package sandbox

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strings"

	"github.com/vishvananda/netlink"
)

// run runs a program and returns a wrapped error with its output on failure.
func run(ctx context.Context, name string, args ...string) error {
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// EnsureBridge creates (if missing) the bridge named br in the current
// network namespace, gives it gw/bits, brings it up and turns on IPv4
// forwarding for this namespace (the sysctl is per network namespace).
func EnsureBridge(ctx context.Context, br string, gw netip.Prefix) error {
	if err := exec.CommandContext(ctx, "ip", "link", "show", br).Run(); err != nil {
		if err := run(ctx, "ip", "link", "add", br, "type", "bridge"); err != nil {
			return fmt.Errorf("create bridge: %w", err)
		}
	}
	out, _ := exec.CommandContext(ctx, "ip", "-o", "addr", "show", "dev", br).Output()
	if !strings.Contains(string(out), " "+gw.String()+" ") {
		if err := run(ctx, "ip", "addr", "add", gw.String(), "dev", br); err != nil {
			return fmt.Errorf("address bridge: %w", err)
		}
	}
	if err := run(ctx, "ip", "link", "set", br, "up"); err != nil {
		return err
	}
	if err := os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1\n"), 0o644); err != nil {
		return fmt.Errorf("enable forwarding: %w", err)
	}
	return nil
}

// podNet wires a pod's network namespace: veth host end on the bridge,
// eth0 inside with ip/bits, lo up, default route via gw.
func podNet(ctx context.Context, nsName, hostIf, bridge string, ip netip.Prefix, gw netip.Addr) error {
	if err := run(ctx, "ip", "netns", "add", nsName); err != nil {
		return err
	}
	steps := [][]string{
		{"ip", "link", "add", hostIf, "type", "veth", "peer", "name", "eth0", "netns", nsName},
		{"ip", "link", "set", hostIf, "master", bridge},
		{"ip", "link", "set", hostIf, "up"},
		{"ip", "-n", nsName, "link", "set", "lo", "up"},
		{"ip", "-n", nsName, "addr", "add", ip.String(), "dev", "eth0"},
		{"ip", "-n", nsName, "link", "set", "eth0", "up"},
		{"ip", "-n", nsName, "route", "add", "default", "via", gw.String(), "dev", "eth0"},
	}
	for _, s := range steps {
		if err := run(ctx, s[0], s[1:]...); err != nil {
			return err
		}
	}
	return setHairpin(hostIf)
}

// setHairpin turns on hairpin mode on the pod's bridge port, as the kubelet
// (--hairpin-mode=hairpin-veth) and the CNI bridge plugin (hairpinMode) do:
// when a pod's packet to a Service is DNATed back to the pod itself, the
// bridge (with bridge-nf-call-iptables on) must send the frame out of the
// port it came in on, which it refuses by default.
func setHairpin(hostIf string) error {
	link, err := netlink.LinkByName(hostIf)
	if err != nil {
		return fmt.Errorf("hairpin mode on %s: %w", hostIf, err)
	}
	if err := netlink.LinkSetHairpin(link, true); err != nil {
		return fmt.Errorf("hairpin mode on %s: %w", hostIf, err)
	}
	return nil
}

// deleteNetNS removes a pod network namespace (its veth pair goes with it).
// A missing namespace is not an error.
func deleteNetNS(ctx context.Context, nsName string) error {
	if _, err := os.Stat("/var/run/netns/" + nsName); os.IsNotExist(err) {
		return nil
	}
	return run(ctx, "ip", "netns", "delete", nsName)
}
