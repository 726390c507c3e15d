package dnsconfig

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func pod(ns string, policy v1.DNSPolicy) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "myapp-b9744c975-dv4qr"}, Spec: v1.PodSpec{DNSPolicy: policy}}
}

func TestResolvConf(t *testing.T) {
	host, err := ParseResolvConf(strings.NewReader("# comment\nnameserver 192.0.2.53\nsearch corp.example. .\noptions edns0 timeout:2\n"))
	if err != nil {
		t.Fatal(err)
	}
	cl := Cluster{Servers: []string{"10.96.0.10"}, Domain: "cluster.local"}
	withHost := cl
	withHost.Host = host
	two := "2"
	cases := []struct {
		name    string
		pod     *v1.Pod
		cluster Cluster
		want    string
	}{
		{"seed ClusterFirst", pod("default", ""), cl,
			"search default.svc.cluster.local svc.cluster.local cluster.local\nnameserver 10.96.0.10\noptions ndots:5\n"},
		{"ClusterFirst appends host searches", pod("prod", v1.DNSClusterFirst), withHost,
			"search prod.svc.cluster.local svc.cluster.local cluster.local corp.example\nnameserver 10.96.0.10\noptions ndots:5\n"},
		{"Default is the node's", pod("prod", v1.DNSDefault), withHost,
			"search corp.example\nnameserver 192.0.2.53\noptions edns0 timeout:2\n"},
		{"ClusterFirst on host network falls back to Default", func() *v1.Pod {
			p := pod("prod", v1.DNSClusterFirst)
			p.Spec.HostNetwork = true
			return p
		}(), withHost, "search corp.example\nnameserver 192.0.2.53\noptions edns0 timeout:2\n"},
		{"ClusterFirstWithHostNet", func() *v1.Pod {
			p := pod("prod", v1.DNSClusterFirstWithHostNet)
			p.Spec.HostNetwork = true
			return p
		}(), cl, "search prod.svc.cluster.local svc.cluster.local cluster.local\nnameserver 10.96.0.10\noptions ndots:5\n"},
		{"None with dnsConfig", func() *v1.Pod {
			p := pod("default", v1.DNSNone)
			p.Spec.DNSConfig = &v1.PodDNSConfig{
				Nameservers: []string{"192.0.2.1", "192.0.2.1"},
				Searches:    []string{"ns1.svc.cluster-domain.example", "my.dns.search.suffix"},
				Options:     []v1.PodDNSConfigOption{{Name: "ndots", Value: &two}, {Name: "edns0"}},
			}
			return p
		}(), withHost, "search ns1.svc.cluster-domain.example my.dns.search.suffix\nnameserver 192.0.2.1\noptions ndots:2 edns0\n"},
		{"ClusterFirst merged with dnsConfig", func() *v1.Pod {
			p := pod("default", "")
			p.Spec.DNSConfig = &v1.PodDNSConfig{
				Nameservers: []string{"192.0.2.9", "192.0.2.8", "192.0.2.7"},
				Searches:    []string{"svc.cluster.local", "extra.example"},
				Options:     []v1.PodDNSConfigOption{{Name: "ndots", Value: &two}},
			}
			return p
		}(), cl, "search default.svc.cluster.local svc.cluster.local cluster.local extra.example\nnameserver 10.96.0.10\nnameserver 192.0.2.9\nnameserver 192.0.2.8\noptions ndots:2\n"},
		{"no cluster DNS: ClusterFirst uses the node's", pod("default", ""), Cluster{Domain: "cluster.local", Host: host},
			"search corp.example\nnameserver 192.0.2.53\noptions edns0 timeout:2\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := string(ForPod(c.pod, c.cluster).ResolvConf()); got != c.want {
				t.Errorf("got\n%s\nwant\n%s", got, c.want)
			}
		})
	}
}

func TestSearchLimits(t *testing.T) {
	p := pod("default", "")
	p.Spec.DNSConfig = &v1.PodDNSConfig{}
	for i := 0; i < 40; i++ {
		p.Spec.DNSConfig.Searches = append(p.Spec.DNSConfig.Searches, strings.Repeat("a", 60)+string(rune('a'+i%26))+string(rune('a'+i/26)))
	}
	c := ForPod(p, Cluster{Servers: []string{"10.96.0.10"}, Domain: "cluster.local"})
	if len(c.Searches) > MaxSearchPaths || len(strings.Join(c.Searches, " ")) > MaxSearchListChars {
		t.Errorf("limits not applied: %d searches, %d chars", len(c.Searches), len(strings.Join(c.Searches, " ")))
	}
	if c.Searches[0] != "default.svc.cluster.local" {
		t.Errorf("cluster searches must come first, got %v", c.Searches[:3])
	}
}

func TestHosts(t *testing.T) {
	p := pod("default", "")
	h, d := Hostname(p, "cluster.local")
	got := string(Hosts([]string{"10.244.1.5"}, h, d, nil))
	want := "# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\nfe00::0\tip6-localnet\nfe00::0\tip6-mcastprefix\nfe00::1\tip6-allnodes\nfe00::2\tip6-allrouters\n10.244.1.5\tmyapp-b9744c975-dv4qr\n"
	if got != want {
		t.Errorf("got\n%q\nwant\n%q", got, want)
	}
	p.Spec.Hostname, p.Spec.Subdomain = "web-0", "nginx"
	h, d = Hostname(p, "cluster.local")
	got = string(Hosts([]string{"10.244.1.5"}, h, d, []v1.HostAlias{{IP: "127.0.0.1", Hostnames: []string{"foo.local", "bar.local"}}}))
	if !strings.HasSuffix(got, "10.244.1.5\tweb-0.nginx.default.svc.cluster.local\tweb-0\n\n# Entries added by HostAliases.\n127.0.0.1\tfoo.local\tbar.local\n") {
		t.Errorf("got\n%s", got)
	}
	long := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: strings.Repeat("x", 62) + "-abc"}}
	if h, _ := Hostname(long, ""); h != strings.Repeat("x", 62) {
		t.Errorf("long name hostname = %q", h)
	}
}
