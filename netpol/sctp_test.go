package netpol

import (
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// sctpInit is an SCTP packet (common header and one INIT chunk, RFC 9260)
// from srcPort to dstPort; tag is its initiate tag, by which the receiver
// recognises it. The checksum is CRC32c, as the kernel's conntrack checks
// it.
func sctpInit(srcPort, dstPort uint16, tag uint32) []byte {
	b := make([]byte, 12+20)
	binary.BigEndian.PutUint16(b[0:], srcPort)
	binary.BigEndian.PutUint16(b[2:], dstPort)
	// Verification tag 0: an INIT's.
	b[12] = 1                                 // chunk type INIT
	binary.BigEndian.PutUint16(b[14:], 20)    // chunk length
	binary.BigEndian.PutUint32(b[16:], tag)   // initiate tag
	binary.BigEndian.PutUint32(b[20:], 65536) // a_rwnd
	binary.BigEndian.PutUint16(b[24:], 1)     // outbound streams
	binary.BigEndian.PutUint16(b[26:], 1)     // inbound streams
	binary.BigEndian.PutUint32(b[28:], tag^1) // initial TSN
	binary.LittleEndian.PutUint32(b[8:], crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)))
	return b
}

// sctpReaches sends an SCTP INIT from src to dst:port over raw IP sockets
// (protocol 132) and reports whether it arrives in dst's namespace.
func sctpReaches(t *testing.T, src, dst *bedPod, port uint16, tag uint32) bool {
	t.Helper()
	var rc net.PacketConn
	if err := dst.netns.Do(func() (err error) { rc, err = net.ListenPacket("ip4:132", dst.ip); return err }); err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	var sc net.PacketConn
	if err := src.netns.Do(func() (err error) { sc, err = net.ListenPacket("ip4:132", src.ip); return err }); err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	if _, err := sc.WriteTo(sctpInit(40000+uint16(tag%1000), port, tag), &net.IPAddr{IP: net.ParseIP(dst.ip)}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Second)
	buf := make([]byte, 1500)
	for {
		_ = rc.SetReadDeadline(deadline)
		n, _, err := rc.ReadFrom(buf)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return false
		}
		if err != nil {
			t.Fatal(err)
		}
		if n >= 32 && binary.BigEndian.Uint16(buf[2:]) == port && buf[12] == 1 && binary.BigEndian.Uint32(buf[16:]) == tag {
			return true
		}
	}
}

// TestSCTPByPort: NetworkPolicy ports with protocol SCTP, judged on real
// SCTP packets (an INIT chunk with a valid CRC32c, which the kernel's SCTP
// conntrack tracks) crossing from a pod on node 2 to a pod on node 1.
//
// The kernel here is built without SCTP sockets (CONFIG_IP_SCTP unset, and
// without loadable modules: socket(AF_INET, SOCK_STREAM, IPPROTO_SCTP)
// fails with EPROTONOSUPPORT in every namespace), so no SCTP association
// can be set up; the packets are written and read with raw IP sockets
// (protocol 132). Netfilter's SCTP support (conntrack, the `sctp dport`
// match) is built in, and that is what enforcement uses.
func TestSCTPByPort(t *testing.T) {
	b := newBed(t)
	ctx := context.Background()
	src, dst := b.pods["y/b"], b.pods["x/a"]
	if s, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, syscall.IPPROTO_SCTP); err == nil {
		syscall.Close(s)
		t.Log("this kernel has SCTP sockets; the test still uses raw packets")
	} else {
		t.Logf("SCTP sockets: %v (raw SCTP packets instead)", err)
	}
	tag := uint32(time.Now().UnixNano())
	try := func(port uint16) bool { tag++; return sctpReaches(t, src, dst, port, tag) }
	if !try(80) || !try(81) {
		t.Fatal("SCTP to ports 80 and 81 must pass before any policy")
	}
	sctp := corev1.ProtocolSCTP
	p80 := np("x", "sctp-80", sel("pod", "a"), []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
		[]networkingv1.NetworkPolicyIngressRule{{Ports: []networkingv1.NetworkPolicyPort{port(80, sctp)}}}, nil)
	if _, err := b.client.NetworkingV1().NetworkPolicies("x").Create(ctx, p80, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	b.waitSynced()
	if !try(80) {
		t.Error("SCTP to port 80 refused; the policy allows SCTP 80")
	}
	if try(81) {
		t.Error("SCTP to port 81 allowed; the policy allows only SCTP 80")
	}
	if (probe{src, dst, 80, "TCP", false}).try() {
		t.Error("TCP to port 80 allowed; the policy allows only SCTP 80")
	}
	if err := b.client.NetworkingV1().NetworkPolicies("x").Delete(ctx, "sctp-80", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	b.waitSynced()
	if !try(81) {
		t.Error("SCTP to port 81 refused after the policy was removed")
	}
}
