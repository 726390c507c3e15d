package iptables

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/svcnet/svcnet/internal/testbed"
	"github.com/svcnet/svcnet/proxy"
	"github.com/svcnet/svcnet/proxy/proxytest"
)

// TestKernelIPv6 sends real IPv6 packets through a dual-stack Service: a
// client pod reaches the Service's IPv6 ClusterIP and lands on the IPv6
// endpoint (programmed by ip6tables-restore), and the IPv4 ClusterIP of the
// same Service still works.
func TestKernelIPv6(t *testing.T) {
	t.Parallel()
	testbed.RequireCommand(t, "ip6tables-restore")
	node := testbed.NewNetNS(t, "v6node")
	server := testbed.NewNetNS(t, "v6srv")
	client := testbed.NewNetNS(t, "v6cli")
	node.MustRun("ip", "link", "add", "cbr0", "type", "bridge")
	node.MustRun("ip", "addr", "add", "10.244.1.1/24", "dev", "cbr0")
	node.MustRun("ip", "-6", "addr", "add", "fd00:10:244:1::1/64", "dev", "cbr0", "nodad")
	node.MustRun("ip", "link", "set", "cbr0", "up")
	node.MustRun("sysctl", "-q", "-w", "net.ipv4.ip_forward=1")
	node.MustRun("sysctl", "-q", "-w", "net.ipv6.conf.all.forwarding=1")
	for i, pod := range []*testbed.NetNS{server, client} {
		port := fmt.Sprintf("p%d", i)
		testbed.Link(t, pod, "eth0", fmt.Sprintf("10.244.1.%d/24", i+2), node, port, "")
		pod.MustRun("ip", "-6", "addr", "add", fmt.Sprintf("fd00:10:244:1::%d/64", i+2), "dev", "eth0", "nodad")
		node.MustRun("ip", "link", "set", port, "master", "cbr0")
		pod.MustRun("ip", "route", "add", "default", "via", "10.244.1.1")
		pod.MustRun("ip", "-6", "route", "add", "default", "via", "fd00:10:244:1::1")
	}
	var ln net.Listener
	if err := proxytest.Do(server, func() error {
		var err error
		ln, err = net.Listen("tcp", ":8080")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			fmt.Fprintf(c, "%s\n", c.LocalAddr())
			c.Close()
		}
	}()

	ex := proxy.OSExecutor{NetNS: node.Name}
	p := New(proxy.ModeConfig{Exec: ex, IPv4: true, IPv6: true,
		ClusterCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16"), netip.MustParsePrefix("fd00:10:244::/48")}}, &Runner{Exec: ex})
	defer func() { _ = p.Cleanup(context.Background()) }()
	name := spn("default", "dual", "", v1.ProtocolTCP)
	svcs := proxy.ServicePortMap{name: {Name: name, Type: v1.ServiceTypeClusterIP, ClusterIPs: addrs("fd00:10:96::10", "10.96.0.10"),
		Port: 80, Protocol: v1.ProtocolTCP, SessionAffinity: v1.ServiceAffinityNone}}
	epm := proxy.EndpointsMap{name: append(eps("n1", true, 8080, "fd00:10:244:1::2"), eps("n1", true, 8080, "10.244.1.2")...)}
	if err := p.Sync(context.Background(), &proxy.SyncRequest{Full: true, Services: svcs, Endpoints: epm}); err != nil {
		t.Fatal(err)
	}
	for _, dst := range []string{"[fd00:10:96::10]:80", "10.96.0.10:80"} {
		var c net.Conn
		if err := proxytest.Do(client, func() error {
			var err error
			c, err = net.DialTimeout("tcp", dst, 3*time.Second)
			return err
		}); err != nil {
			t.Errorf("dial %s: %v", dst, err)
			continue
		}
		buf := make([]byte, 128)
		_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
		n, _ := c.Read(buf)
		c.Close()
		t.Logf("%s answered by server address %s", dst, buf[:n])
		if n == 0 {
			t.Errorf("%s: no answer", dst)
		}
	}
}
