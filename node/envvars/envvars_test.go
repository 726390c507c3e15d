package envvars

import (
	"reflect"
	"sort"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func svc(ns, name, ip string, ports ...v1.ServicePort) *v1.Service {
	return &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       v1.ServiceSpec{ClusterIP: ip, Ports: ports},
	}
}

func dump(m map[string]string) string {
	var lines []string
	for k, v := range m {
		lines = append(lines, k+"="+v)
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// The seed's `env | grep MYAPP` output: seven variables for the one-port Service.
func TestSeedMyapp(t *testing.T) {
	all := []*v1.Service{
		svc("default", "kubernetes", "10.96.0.1", v1.ServicePort{Name: "https", Port: 443, Protocol: v1.ProtocolTCP}),
		svc("default", "myapp", "10.96.3.215", v1.ServicePort{Port: 38080, Protocol: v1.ProtocolTCP}),
	}
	got := ForPod("default", nil, all)
	want := `KUBERNETES_PORT=tcp://10.96.0.1:443
KUBERNETES_PORT_443_TCP=tcp://10.96.0.1:443
KUBERNETES_PORT_443_TCP_ADDR=10.96.0.1
KUBERNETES_PORT_443_TCP_PORT=443
KUBERNETES_PORT_443_TCP_PROTO=tcp
KUBERNETES_SERVICE_HOST=10.96.0.1
KUBERNETES_SERVICE_PORT=443
KUBERNETES_SERVICE_PORT_HTTPS=443
MYAPP_PORT=tcp://10.96.3.215:38080
MYAPP_PORT_38080_TCP=tcp://10.96.3.215:38080
MYAPP_PORT_38080_TCP_ADDR=10.96.3.215
MYAPP_PORT_38080_TCP_PORT=38080
MYAPP_PORT_38080_TCP_PROTO=tcp
MYAPP_SERVICE_HOST=10.96.3.215
MYAPP_SERVICE_PORT=38080`
	if d := dump(got); d != want {
		t.Errorf("got\n%s\nwant\n%s", d, want)
	}
}

func TestSelection(t *testing.T) {
	f := false
	all := []*v1.Service{
		svc("default", "kubernetes", "10.96.0.1", v1.ServicePort{Name: "https", Port: 443}),
		svc("prod", "api-service", "10.96.5.5", v1.ServicePort{Name: "http", Port: 80}, v1.ServicePort{Name: "dns-udp", Port: 53, Protocol: v1.ProtocolUDP}),
		svc("prod", "headless", "None", v1.ServicePort{Port: 80}),
		svc("prod", "ext", "", v1.ServicePort{Port: 80}),
		svc("other", "elsewhere", "10.96.9.9", v1.ServicePort{Port: 80}),
	}
	got := ForPod("prod", nil, all)
	for _, k := range []string{"API_SERVICE_SERVICE_HOST", "API_SERVICE_SERVICE_PORT_HTTP", "API_SERVICE_SERVICE_PORT_DNS_UDP", "API_SERVICE_PORT_53_UDP_PROTO", "KUBERNETES_SERVICE_HOST"} {
		if _, ok := got[k]; !ok {
			t.Errorf("missing %s in\n%s", k, dump(got))
		}
	}
	if got["API_SERVICE_PORT_53_UDP"] != "udp://10.96.5.5:53" || got["API_SERVICE_PORT"] != "tcp://10.96.5.5:80" {
		t.Errorf("link variables wrong:\n%s", dump(got))
	}
	for k := range got {
		if strings.HasPrefix(k, "HEADLESS") || strings.HasPrefix(k, "EXT_") || strings.HasPrefix(k, "ELSEWHERE") {
			t.Errorf("unexpected %s", k)
		}
	}
	noLinks := ForPod("prod", &f, all)
	want := ForPod("nothing-here", nil, all[:1])
	if !reflect.DeepEqual(noLinks, want) {
		t.Errorf("enableServiceLinks=false: got\n%s\nwant only master service", dump(noLinks))
	}
}

func TestNamespaceServiceShadowsMaster(t *testing.T) {
	all := []*v1.Service{
		svc("team", "kubernetes", "10.96.7.7", v1.ServicePort{Port: 8443}),
		svc("default", "kubernetes", "10.96.0.1", v1.ServicePort{Name: "https", Port: 443}),
	}
	if got := ForPod("team", nil, all)["KUBERNETES_SERVICE_HOST"]; got != "10.96.7.7" {
		t.Errorf("KUBERNETES_SERVICE_HOST = %q, want the namespace's own service", got)
	}
}

func TestIPv6(t *testing.T) {
	got := ForPod("default", nil, []*v1.Service{svc("default", "v6", "fd00::10", v1.ServicePort{Port: 80})})
	if got["V6_PORT"] != "tcp://[fd00::10]:80" || got["V6_PORT_80_TCP_ADDR"] != "fd00::10" {
		t.Errorf("got\n%s", dump(got))
	}
}
