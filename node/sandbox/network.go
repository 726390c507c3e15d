package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strings"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/svcnet/svcnet/internal/netwire"
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
// network namespace, gives it the gateway addresses gws (one per family of
// the node's pod CIDRs), brings it up and turns on forwarding of those
// families for this namespace (the sysctls are per network namespace).
func EnsureBridge(ctx context.Context, br string, gws ...netip.Prefix) error {
	link, err := netlink.LinkByName(br)
	if _, missing := err.(netlink.LinkNotFoundError); missing {
		if err := netlink.LinkAdd(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: br}}); err != nil && !errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("create bridge %s: %w", br, err)
		}
		link, err = netlink.LinkByName(br)
	}
	if err != nil {
		return fmt.Errorf("bridge %s: %w", br, err)
	}
	for _, gw := range gws {
		if err := netlink.AddrAdd(link, netwire.Addr(gw)); err != nil && !errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("address bridge %s: %w", br, err)
		}
	}
	if err := netlink.LinkSetUp(link); err != nil {
		return fmt.Errorf("bring bridge %s up: %w", br, err)
	}
	for _, gw := range gws {
		sysctl := "/proc/sys/net/ipv4/ip_forward"
		if gw.Addr().Is6() {
			sysctl = "/proc/sys/net/ipv6/conf/all/forwarding"
		}
		if err := os.WriteFile(sysctl, []byte("1\n"), 0o644); err != nil {
			return fmt.Errorf("enable forwarding: %w", err)
		}
	}
	return nil
}

// podNet wires a pod's network namespace: veth host end on the bridge (in
// hairpin mode), eth0 inside with the addresses ips (one per family), lo
// up, a default route of each family via the gateway gws[i] of ips[i]. The
// namespace itself is made with `ip netns add`, which also makes the
// /run/netns mount point shared, so the name is visible from the mount
// namespaces of svcnet up, svcnet exec and the infra process alike.
func podNet(ctx context.Context, nsName, hostIf, bridge string, ips []netip.Prefix, gws []netip.Addr) error {
	if err := run(ctx, "ip", "netns", "add", nsName); err != nil {
		return err
	}
	if err := netwire.Wire(netwire.Attach{NetNS: nsName, HostIf: hostIf, Bridge: bridge, Addrs: ips, Gateways: gws}); err != nil {
		return err
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

// deleteHostIf deletes the pod's veth pair by its host end, in the current
// network namespace. Deleting the namespace alone frees the pair too, but
// only when the kernel's namespace cleanup work runs, after `ip netns
// delete` has returned; a caller that looks for the port right after a
// teardown (or reuses the name) would still find it. A missing link is not
// an error.
func deleteHostIf(hostIf string) error {
	if hostIf == "" {
		return nil
	}
	link, err := netlink.LinkByName(hostIf)
	if _, missing := err.(netlink.LinkNotFoundError); missing {
		return nil
	}
	if err != nil {
		return fmt.Errorf("veth %s: %w", hostIf, err)
	}
	if err := netlink.LinkDel(link); err != nil && !errors.Is(err, unix.ENODEV) {
		return fmt.Errorf("delete veth %s: %w", hostIf, err)
	}
	return nil
}

// deleteNetNS removes a pod network namespace (its veth pair goes with it).
// A missing namespace is not an error.
func deleteNetNS(ctx context.Context, nsName string) error {
	if nsName == "" {
		return nil
	}
	if _, err := os.Stat("/var/run/netns/" + nsName); os.IsNotExist(err) {
		return nil
	}
	return run(ctx, "ip", "netns", "delete", nsName)
}
