package testbed

import (
	"net"
	"strings"
	"testing"
)

func TestLinkedNamespacesTalkAndHaveNoWayOut(t *testing.T) {
	a := NewNetNS(t, "a")
	b := NewNetNS(t, "b")
	Link(t, a, "eth0", "192.0.2.1/24", b, "eth0", "192.0.2.2/24")
	if out := a.MustRun("ping", "-c1", "-W2", "192.0.2.2"); !strings.Contains(out, "1 received") {
		t.Fatalf("ping: %s", out)
	}
	// No default route: anything off-link is unreachable.
	if out, err := a.Run("ip", "route", "get", "1.1.1.1"); err == nil {
		t.Fatalf("namespace has a route out: %s", out)
	}
	// A Go listener opened inside b with Do stays in b.
	var ln net.Listener
	if err := b.Do(func() (err error) { ln, err = net.Listen("tcp", "192.0.2.2:8080"); return }); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err == nil {
			c.Write([]byte("hi"))
			c.Close()
		}
	}()
	var got []byte
	if err := a.Do(func() error {
		c, err := net.Dial("tcp", "192.0.2.2:8080")
		if err != nil {
			return err
		}
		defer c.Close()
		got = make([]byte, 2)
		_, err = c.Read(got)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if string(got) != "hi" {
		t.Fatalf("got %q", got)
	}
}
