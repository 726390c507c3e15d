package hostport

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func hpPod(name string, hostIP string, port int32) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}, Spec: v1.PodSpec{Containers: []v1.Container{{
		Name: "web", Ports: []v1.ContainerPort{{ContainerPort: 8080, HostPort: port, HostIP: hostIP}, {ContainerPort: 9090}},
	}}}}
}

func TestManagerStates(t *testing.T) {
	var last string
	m := NewManager(netip.MustParseAddr("172.18.0.2"), netip.MustParsePrefix("10.244.1.0/24"), func(_ context.Context, p []byte) error {
		last = string(p)
		return nil
	})
	ctx := context.Background()
	a := FromPod(hpPod("a", "", 8080), netip.MustParseAddr("10.244.1.2"))
	if len(a) != 1 {
		t.Fatalf("mappings %v", a)
	}
	if err := m.Add(ctx, "default/a", a); err != nil {
		t.Fatal(err)
	}
	want := "*nat\n:SVCNET-HOSTPORTS - [0:0]\n:SVCNET-HOSTPORTS-MASQ - [0:0]\n" +
		"-A SVCNET-HOSTPORTS -d 172.18.0.2/32 -p tcp -m tcp --dport 8080 -m comment --comment \"default/a hostport 8080\" -j DNAT --to-destination 10.244.1.2:8080\n" +
		"-A SVCNET-HOSTPORTS-MASQ -s 10.244.1.2/32 -d 10.244.1.2/32 -p tcp -m tcp --dport 8080 -j MASQUERADE\nCOMMIT\n"
	if last != want {
		t.Errorf("payload\n%s\nwant\n%s", last, want)
	}
	err := m.Add(ctx, "default/b", FromPod(hpPod("b", "", 8080), netip.MustParseAddr("10.244.1.3")))
	var ce *ConflictError
	if !errors.As(err, &ce) || err.Error() != "hostPort 8080/TCP is already used by pod default/a" {
		t.Fatalf("conflict: %v", err)
	}
	if err := m.Add(ctx, "default/c", FromPod(hpPod("c", "", 8081), netip.MustParseAddr("10.244.1.4"))); err != nil {
		t.Fatal(err)
	}
	if err := m.Remove(ctx, "default/a"); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(last, "default/a") || !strings.Contains(last, "default/c hostport 8081") {
		t.Errorf("after remove:\n%s", last)
	}
	if err := m.Add(ctx, "default/b", FromPod(hpPod("b", "", 8080), netip.MustParseAddr("10.244.1.3"))); err != nil {
		t.Errorf("port freed but refused: %v", err)
	}
	// Distinct explicit host IPs don't conflict; an explicit one conflicts with the wildcard.
	x := FromPod(hpPod("x", "172.18.0.2", 9000), netip.MustParseAddr("10.244.1.5"))
	y := FromPod(hpPod("y", "198.51.100.7", 9000), netip.MustParseAddr("10.244.1.6"))
	z := FromPod(hpPod("z", "", 9000), netip.MustParseAddr("10.244.1.7"))
	if err := m.Add(ctx, "default/x", x); err != nil {
		t.Fatal(err)
	}
	if err := m.Add(ctx, "default/y", y); err != nil {
		t.Errorf("different host IPs conflict: %v", err)
	}
	if err := m.Add(ctx, "default/z", z); err == nil {
		t.Error("wildcard host IP accepted over explicit ones")
	}
}
