package dnstest

import (
	"net"
	"testing"
)

// ListenUDPAndTCP opens a UDP socket and a TCP listener on the same free
// port of 127.0.0.1, for stub DNS servers in tests. The kernel's free UDP
// port may have its TCP twin taken by another process, so it tries other
// ports.
func ListenUDPAndTCP(t testing.TB) (net.PacketConn, net.Listener) {
	t.Helper()
	for attempt := 0; ; attempt++ {
		pc, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ln, err := net.Listen("tcp", pc.LocalAddr().String())
		if err == nil {
			return pc, ln
		}
		pc.Close()
		if attempt >= 9 {
			t.Fatal(err)
		}
	}
}
