package endpoints

import (
	"bytes"
	"crypto/md5"
	"fmt"
	"reflect"
	"sort"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

func uidRef(uid string) *corev1.ObjectReference {
	return &corev1.ObjectReference{UID: types.UID(uid)}
}

type addrs = []corev1.EndpointAddress
type ports = []corev1.EndpointPort

// TestRepackOrder checks Repack against inputs and outputs of Kubernetes'
// own RepackSubsets tests (pkg/api/v1/endpoints), which fix the order the
// hash-based sorting produces for these subsets and ports.
func TestRepackOrder(t *testing.T) {
	for _, tc := range []struct {
		name        string
		given, want []corev1.EndpointSubset
	}{
		{"two sets, two ips, two ports",
			[]corev1.EndpointSubset{
				{Addresses: addrs{{IP: "1.2.3.4"}}, Ports: ports{{Port: 111}}},
				{Addresses: addrs{{IP: "5.6.7.8"}}, Ports: ports{{Port: 222}}}},
			[]corev1.EndpointSubset{
				{Addresses: addrs{{IP: "1.2.3.4"}}, Ports: ports{{Port: 111}}},
				{Addresses: addrs{{IP: "5.6.7.8"}}, Ports: ports{{Port: 222}}}}},
		{"four sets, three ips, three ports, jumbled",
			[]corev1.EndpointSubset{
				{Addresses: addrs{{IP: "1.2.3.4"}}, Ports: ports{{Port: 111}}},
				{Addresses: addrs{{IP: "1.2.3.5"}}, Ports: ports{{Port: 222}}},
				{Addresses: addrs{{IP: "1.2.3.6"}}, Ports: ports{{Port: 111}}},
				{Addresses: addrs{{IP: "1.2.3.5"}}, Ports: ports{{Port: 333}}}},
			[]corev1.EndpointSubset{
				{Addresses: addrs{{IP: "1.2.3.4"}, {IP: "1.2.3.6"}}, Ports: ports{{Port: 111}}},
				{Addresses: addrs{{IP: "1.2.3.5"}}, Ports: ports{{Port: 222}, {Port: 333}}}}},
		{"two sets, dup mixed ip, dup uids, two ports",
			[]corev1.EndpointSubset{
				{Addresses: addrs{{IP: "1.2.3.4", TargetRef: uidRef("uid-1")}}, Ports: ports{{Port: 111}}},
				{NotReadyAddresses: addrs{{IP: "1.2.3.4", TargetRef: uidRef("uid-1")}}, Ports: ports{{Port: 222}}}},
			[]corev1.EndpointSubset{
				{Addresses: addrs{{IP: "1.2.3.4", TargetRef: uidRef("uid-1")}}, Ports: ports{{Port: 111}}},
				{NotReadyAddresses: addrs{{IP: "1.2.3.4", TargetRef: uidRef("uid-1")}}, Ports: ports{{Port: 222}}}}},
		{"two sets, two ips, two dup ip with uid, dup port, wrong order",
			[]corev1.EndpointSubset{
				{Addresses: addrs{{IP: "5.6.7.8"}}, Ports: ports{{Port: 111}}},
				{Addresses: addrs{{IP: "5.6.7.8", TargetRef: uidRef("uid-1")}}, Ports: ports{{Port: 111}}},
				{Addresses: addrs{{IP: "1.2.3.4", TargetRef: uidRef("uid-1")}}, Ports: ports{{Port: 111}}},
				{Addresses: addrs{{IP: "1.2.3.4"}}, Ports: ports{{Port: 111}}}},
			[]corev1.EndpointSubset{
				{Addresses: addrs{{IP: "1.2.3.4"}, {IP: "1.2.3.4", TargetRef: uidRef("uid-1")},
					{IP: "5.6.7.8"}, {IP: "5.6.7.8", TargetRef: uidRef("uid-1")}}, Ports: ports{{Port: 111}}}}},
		{"mixed ips end up split",
			[]corev1.EndpointSubset{
				{Addresses: addrs{{IP: "5.6.7.8"}}, Ports: ports{{Port: 111}}},
				{NotReadyAddresses: addrs{{IP: "5.6.7.8", TargetRef: uidRef("uid-1")}}, Ports: ports{{Port: 111}}},
				{NotReadyAddresses: addrs{{IP: "1.2.3.4", TargetRef: uidRef("uid-1")}}, Ports: ports{{Port: 111}}},
				{NotReadyAddresses: addrs{{IP: "1.2.3.4"}}, Ports: ports{{Port: 111}}}},
			[]corev1.EndpointSubset{
				{Addresses: addrs{{IP: "5.6.7.8"}},
					NotReadyAddresses: addrs{{IP: "1.2.3.4"}, {IP: "1.2.3.4", TargetRef: uidRef("uid-1")}, {IP: "5.6.7.8", TargetRef: uidRef("uid-1")}},
					Ports:             ports{{Port: 111}}}}},
		{"one set, dup mixed ips with target-refs: first kept, not ready wins",
			[]corev1.EndpointSubset{{
				Addresses:         addrs{{IP: "1.2.3.4", TargetRef: &corev1.ObjectReference{Name: "foo"}}},
				NotReadyAddresses: addrs{{IP: "1.2.3.4", TargetRef: &corev1.ObjectReference{Name: "bar"}}},
				Ports:             ports{{Port: 111}}}},
			[]corev1.EndpointSubset{{
				NotReadyAddresses: addrs{{IP: "1.2.3.4", TargetRef: &corev1.ObjectReference{Name: "foo"}}},
				Ports:             ports{{Port: 111}}}}},
		// IPs compare as strings, as LessEndpointAddress does.
		{"string order of IPs",
			[]corev1.EndpointSubset{{Addresses: addrs{{IP: "10.244.1.9"}, {IP: "10.244.1.10"}, {IP: "10.244.2.1"}}, Ports: ports{{Port: 8080}}}},
			[]corev1.EndpointSubset{{Addresses: addrs{{IP: "10.244.1.10"}, {IP: "10.244.1.9"}, {IP: "10.244.2.1"}}, Ports: ports{{Port: 8080}}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Repack(tc.given)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

// TestRepackPortHashOrder: ports are ordered by the MD5 of their spew dump,
// whose exact text is spelled out here, not by name or number.
func TestRepackPortHashOrder(t *testing.T) {
	in := ports{
		{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP},
		{Name: "https", Port: 443, Protocol: corev1.ProtocolTCP},
		{Name: "metrics", Port: 9090, Protocol: corev1.ProtocolTCP},
		{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP},
	}
	dump := func(p corev1.EndpointPort) string {
		return fmt.Sprintf("(v1.EndpointPort){Name:(string)%s Port:(int32)%d Protocol:(v1.Protocol)%s AppProtocol:(*string)<nil>}", p.Name, p.Port, p.Protocol)
	}
	want := append(ports(nil), in...)
	sort.Slice(want, func(i, j int) bool {
		a, b := md5.Sum([]byte(dump(want[i]))), md5.Sum([]byte(dump(want[j])))
		return bytes.Compare(a[:], b[:]) < 0
	})
	got := Repack([]corev1.EndpointSubset{{Addresses: addrs{{IP: "10.244.1.5"}}, Ports: in}})
	if len(got) != 1 || !reflect.DeepEqual(got[0].Ports, want) {
		t.Fatalf("ports %+v, want %+v", got, want)
	}
	names := ""
	for _, p := range want {
		names += p.Name + " "
	}
	t.Logf("hash order: %s", names)
}
