package userspace

import (
	"net"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestAcceptedSocketsInheritOptions: the event loops set TCP_NODELAY and
// SO_KEEPALIVE once on each listener and rely on accepted sockets
// inheriting them (two system calls fewer per connection).
func TestAcceptedSocketsInheritOptions(t *testing.T) {
	fds, port, err := listenTCP("127.0.0.1:0", 1)
	if err != nil {
		t.Fatal(err)
	}
	fd := fds[0]
	defer unix.Close(fd)
	setSockopts(fd)
	c, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var afd int
	deadline := time.Now().Add(5 * time.Second)
	for {
		afd, _, err = unix.Accept4(fd, unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("accept: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	defer unix.Close(afd)
	for _, o := range []struct {
		name       string
		level, opt int
	}{{"TCP_NODELAY", unix.IPPROTO_TCP, unix.TCP_NODELAY}, {"SO_KEEPALIVE", unix.SOL_SOCKET, unix.SO_KEEPALIVE}} {
		if v, err := unix.GetsockoptInt(afd, o.level, o.opt); err != nil || v == 0 {
			t.Errorf("accepted socket: %s = %d (%v), want it inherited from the listener", o.name, v, err)
		}
	}
}
