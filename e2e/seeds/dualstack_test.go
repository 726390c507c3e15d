package seeds

import (
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/svcnet/svcnet/internal/testbed"
)

// 18 (issue 17): the walkthrough over both families of the dual-stack
// cluster every mode runs: a PreferDualStack NodePort Service gets an IPv4
// and an IPv6 ClusterIP; cluster DNS answers AAAA with the IPv6 one, from a
// node and from a pod; curl reaches every pod over the IPv6 ClusterIP (from
// a node and, by name with curl -6, from a pod) and over the IPv6 NodePort
// of every node (from the machine hosting the cluster); the IPv4 side keeps
// working.
func dualStack(s *scenario) {
	s.apply("dual-stack.yaml")
	names, _ := s.waitPods("app=dual", 2)
	fams := s.kubectl("get", "svc", "dual", "-o", "jsonpath={.spec.ipFamilyPolicy} {.spec.ipFamilies} {.spec.clusterIPs} {.spec.ports[0].nodePort}")
	f := strings.Fields(fams)
	if len(f) != 4 || f[0] != "PreferDualStack" || f[1] != `["IPv4","IPv6"]` {
		s.failf([]string{"kubectl get svc dual -o jsonpath=..."}, fams, nil, "want a PreferDualStack Service with families IPv4, IPv6")
	}
	var ips []string
	for _, ip := range strings.Split(strings.Trim(f[2], "[]"), ",") {
		ips = append(ips, strings.Trim(ip, `"`))
	}
	v6, err := netip.ParseAddr(ips[len(ips)-1])
	if len(ips) != 2 || err != nil || !v6.Is6() {
		s.failf([]string{"kubectl get svc dual"}, fams, err, "want two ClusterIPs, the second IPv6")
	}
	v4, np := ips[0], f[3]
	// Every pod has an address of each family, and the Service an
	// EndpointSlice of each.
	podIPs := s.kubectl("get", "pods", "-l", "app=dual", "-o", `jsonpath={range .items[*]}{.status.podIPs[*].ip}{"\n"}{end}`)
	var pod6 []string
	for _, line := range strings.Split(strings.TrimSpace(podIPs), "\n") {
		if p := strings.Fields(line); len(p) == 2 && strings.Contains(p[1], ":") {
			pod6 = append(pod6, p[1])
		}
	}
	if len(pod6) != 2 {
		s.failf([]string{"kubectl get pods -l app=dual -o jsonpath={.status.podIPs}"}, podIPs, nil, "want an IPv4 and an IPv6 address per pod")
	}
	slices.Sort(pod6)
	s.eventually(30*time.Second, "an IPv6 EndpointSlice with both pods", func() ([]string, string, bool) {
		args := []string{"get", "endpointslices", "-l", "kubernetes.io/service-name=dual", "-o",
			`jsonpath={range .items[?(@.addressType=="IPv6")]}{.endpoints[*].addresses[0]}{end}`}
		out, _ := s.c.kubectl(args...)
		got := strings.Fields(out)
		slices.Sort(got)
		return append([]string{"kubectl"}, args...), out, slices.Equal(got, pod6)
	})

	// DNS: AAAA answers the IPv6 ClusterIP, A the IPv4 one, from a node
	// (through either family's kube-dns address) and from a pod (its own
	// resolv.conf).
	for _, q := range []struct{ server, qtype, want string }{
		{"@10.96.0.10", "AAAA", v6.String()}, {"@fd00:10:96::a", "AAAA", v6.String()}, {"@fd00:10:96::a", "A", v4},
	} {
		args := []string{"dig", "+short", "+time=2", "+tries=1", q.server, "-t", q.qtype, "dual.default.svc.cluster.local"}
		s.eventually(20*time.Second, q.qtype+" of dual through "+q.server, func() ([]string, string, bool) {
			out, _ := s.c.onNode(1, args...)
			return args, out, strings.TrimSpace(out) == q.want
		})
	}
	if out := s.inPod(names[0], "dig", "+short", "-t", "AAAA", "dual.default.svc.cluster.local"); strings.TrimSpace(out) != v6.String() {
		s.errorf([]string{"kubectl exec " + names[0] + " -- dig +short -t AAAA dual.default.svc.cluster.local"}, out, "want %s", v6)
	}

	// Data path over IPv6: the ClusterIP from a node reaches both pods,
	// a pod reaches the Service by name over IPv6, every node's IPv6
	// address serves the NodePort.
	var want []string
	for _, n := range names {
		want = append(want, "Running on: "+n+" ")
	}
	url6 := "http://[" + v6.String() + "]:38081"
	s.eventually(30*time.Second, "the IPv6 ClusterIP answers", func() ([]string, string, bool) {
		out, err := s.c.onNode(1, "curl", "-sS", "-m", "2", url6)
		return []string{"curl " + url6}, out, err == nil
	})
	s.curlSpread(1, url6, want, 40)
	if out := s.inPod(names[0], "curl", "-6", "-sS", "-m", "3", "http://dual:38081"); !strings.HasPrefix(out, "Hello Kubernetes bootcamp! | Running on: dual-") {
		s.errorf([]string{"kubectl exec " + names[0] + " -- curl -6 http://dual:38081"}, out, "want the bootcamp answer over IPv6")
	}
	for i := 1; i <= nodes; i++ {
		url := "http://[" + nodeIP6(i) + "]:" + np
		s.eventually(20*time.Second, "IPv6 NodePort answers on "+url, func() ([]string, string, bool) {
			out, err := s.c.onLab("curl", "-sS", "-m", "3", url)
			return []string{"curl " + url}, out, err == nil && strings.HasPrefix(out, "Hello Kubernetes bootcamp! | Running on: dual-")
		})
	}
	if out, err := s.c.onNode(2, "curl", "-sS", "-m", "3", v4+":38081"); err != nil || !strings.HasPrefix(out, "Hello Kubernetes bootcamp!") {
		s.errorf([]string{"curl " + v4 + ":38081"}, out, "the IPv4 ClusterIP of the dual-stack Service: %v", err)
	}
	s.kubectl("delete", "-f", mustAbs("testdata/dual-stack.yaml"), "--wait=false")
}

// TestIPv6SingleStack: `svcnet up --ip-family ipv6` (two nodes, one proxy
// mode: $SVCNET_E2E_IPV6_MODE, default iptables): every address is IPv6;
// the kubernetes and kube-dns Services too; a pod on one node reaches a
// Service by name (AAAA from cluster DNS) and its backends on the other
// node, and the NodePort answers on a node's IPv6 address.
func TestIPv6SingleStack(t *testing.T) {
	testbed.RequireRoot(t)
	testbed.RequireCommand(t, "ip", "nsenter", "kubectl", "curl", "dig")
	if testing.Short() || bin == "" {
		t.Skip("builds the binary and runs a 2-node IPv6 cluster")
	}
	mode := "iptables"
	if m := strings.TrimSpace(os.Getenv("SVCNET_E2E_IPV6_MODE")); m != "" {
		mode = m
	}
	c := startClusterFamily(t, mode, "ipv6", 2, "fd00:172:18::/64")
	s := &scenario{T: t, c: c, name: "ipv6-single-stack"}
	if out := s.kubectl("get", "svc", "-A", "-o", "jsonpath={.items[*].spec.clusterIP}"); !strings.Contains(out, "fd00:10:96::1") || !strings.Contains(out, "fd00:10:96::a") {
		s.errorf([]string{"kubectl get svc -A"}, out, "want the kubernetes and kube-dns Services at fd00:10:96::1 and fd00:10:96::a")
	}
	s.apply("dual-stack.yaml") // PreferDualStack on a single-stack cluster: IPv6 only
	names, ips := s.waitPods("app=dual", 2)
	for _, ip := range ips {
		if !strings.HasPrefix(ip, "fd00:10:244:") {
			s.errorf([]string{"kubectl get pods -l app=dual"}, strings.Join(ips, " "), "want IPv6 pod addresses in fd00:10:244::/56")
		}
	}
	clusterIPs := s.kubectl("get", "svc", "dual", "-o", "jsonpath={.spec.clusterIPs[*]} {.spec.ports[0].nodePort}")
	f := strings.Fields(clusterIPs)
	if len(f) != 2 || !strings.HasPrefix(f[0], "fd00:10:96::") {
		s.failf([]string{"kubectl get svc dual"}, clusterIPs, nil, "want one IPv6 ClusterIP")
	}
	// A client pod on the control-plane node (it tolerates the taint) asks
	// by name: AAAA through the pod's resolv.conf, then the Service.
	s.kubectl("run", "client", "--image=jocatalin/kubernetes-bootcamp:v1", "--overrides",
		`{"spec":{"nodeName":"`+c.nodeName(1)+`","tolerations":[{"key":"node-role.kubernetes.io/control-plane","effect":"NoSchedule"}]}}`)
	s.waitPods("run=client", 1)
	if out := s.inPod("client", "dig", "+short", "-t", "AAAA", "dual.default.svc.cluster.local"); strings.TrimSpace(out) != f[0] {
		s.errorf([]string{"kubectl exec client -- dig +short -t AAAA dual.default.svc.cluster.local"}, out, "want %s", f[0])
	}
	seen := map[string]bool{}
	s.eventually(60*time.Second, "the client pod reaches both backends by name", func() ([]string, string, bool) {
		out, err := s.c.inPod("default", "client", "curl", "-sS", "-m", "3", "http://dual:38081")
		for _, n := range names {
			if err == nil && strings.Contains(out, "Running on: "+n+" ") {
				seen[n] = true
			}
		}
		return []string{"kubectl exec client -- curl http://dual:38081"}, out, len(seen) == len(names)
	})
	url := "http://[" + nodeIP6(1) + "]:" + f[1]
	s.eventually(20*time.Second, "the NodePort answers on "+url, func() ([]string, string, bool) {
		out, err := s.c.onLab("curl", "-sS", "-m", "3", url)
		return []string{"curl " + url}, out, err == nil && strings.HasPrefix(out, "Hello Kubernetes bootcamp! | Running on: dual-")
	})
}
