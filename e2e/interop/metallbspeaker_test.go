package interop

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/svcnet/svcnet/internal/testbed"
)

var (
	l2StatusGVR  = schema.GroupVersionResource{Group: "metallb.io", Version: "v1beta1", Resource: "servicel2statuses"}
	bgpStatusGVR = schema.GroupVersionResource{Group: "metallb.io", Version: "v1beta1", Resource: "servicebgpstatuses"}
)

// birdLab is bird2 as the node network's router, in the lab namespace on
// the bridge (172.30.0.1, AS 64500), peering with the three nodes (AS
// 64512).
type birdLab struct {
	ns   *testbed.NetNS
	sock string
}

func startBird(t *testing.T, lab *testbed.NetNS) *birdLab {
	t.Helper()
	testbed.RequireCommand(t, "bird", "birdc")
	dir := t.TempDir()
	conf := "router id 172.30.0.1;\nprotocol device {}\n"
	for i := 1; i <= 3; i++ {
		conf += fmt.Sprintf("protocol bgp node%d { local 172.30.0.1 as 64500; neighbor 172.30.0.%d as 64512; hold time 9; ipv4 { import all; export none; }; }\n", i, 10+i)
	}
	path := filepath.Join(dir, "bird.conf")
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	b := &birdLab{ns: lab, sock: filepath.Join(dir, "bird.ctl")}
	lab.Start("bird", "-f", "-c", path, "-s", b.sock, "-P", filepath.Join(dir, "bird.pid"))
	return b
}

var (
	birdProtoRE = regexp.MustCompile(`(?m)^(node\d)\s+BGP\s+\S+\s+(\S+)\s+\S+\s+(\S+)`)
	birdViaRE   = regexp.MustCompile(`via 172\.30\.0\.(\d+)`)
	birdAttrRE  = regexp.MustCompile(`(?m)^\s+(BGP\.(?:origin|as_path|next_hop|local_pref|community|large_community|atomic_aggr|aggregator)): (.*)$`)
)

// sessions is each node's BGP session state as bird shows it.
func (b *birdLab) sessions() []string {
	out, _ := b.ns.Run("birdc", "-s", b.sock, "show", "protocols")
	var l []string
	for _, m := range birdProtoRE.FindAllStringSubmatch(out, -1) {
		l = append(l, m[1]+" "+m[2]+" "+m[3])
	}
	sort.Strings(l)
	return l
}

// routes is what bird learned for prefix: per path the announcing node and
// its BGP attributes.
func (b *birdLab) routes(prefix string) []string {
	out, _ := b.ns.Run("birdc", "-s", b.sock, "show", "route", prefix, "all")
	var paths []string
	// One path per "via" line, its attributes below it until the next.
	blocks := birdViaRE.FindAllStringIndex(out, -1)
	for i, loc := range blocks {
		end := len(out)
		if i+1 < len(blocks) {
			end = blocks[i+1][0]
		}
		node := "node-" + fmt.Sprint(atoiOr(birdViaRE.FindStringSubmatch(out[loc[0]:loc[1]])[1])-10)
		var attrs []string
		for _, a := range birdAttrRE.FindAllStringSubmatch(out[loc[1]:end], -1) {
			attrs = append(attrs, a[1]+"="+strings.TrimSpace(a[2]))
		}
		sort.Strings(attrs)
		paths = append(paths, node+" "+strings.Join(attrs, " "))
	}
	sort.Strings(paths)
	return paths
}

func atoiOr(s string) int {
	n := 0
	for _, c := range s {
		n = n*10 + int(c-'0')
	}
	return n
}

// TestRealMetalLBSpeaker runs MetalLB's own speaker (v0.15.2, layer 2
// mode, memberlist off as without its secret) on three node namespaces
// against `svcnet apiserver`, then svcnet's speakers on the same input, and
// compares, for every LoadBalancer Service, which node answers ARP for its
// address (the MAC a client on the node network sees), the
// ServiceL2Status objects (node, Service, interfaces) and the events the
// speakers recorded. The input: one pool advertised to every node, one
// whose advertisement selects nodes by label, one advertised on an
// interface no node has, one with no advertisement; a node labelled
// node.kubernetes.io/exclude-from-external-load-balancers; Services with
// ready endpoints on every node, with externalTrafficPolicy Local and
// endpoints on one node, and without a ready endpoint. Addresses come from
// svcnet's lbipam in both runs (TestRealMetalLBController compares that).
//
// SVCNET_METALLB_SPEAKER is the path of MetalLB's speaker binary; without
// it the test is skipped. Needs root, ip and arping.
func TestRealMetalLBSpeaker(t *testing.T) {
	mlb := os.Getenv("SVCNET_METALLB_SPEAKER")
	if mlb == "" {
		t.Skip("SVCNET_METALLB_SPEAKER is not set (MetalLB's speaker: cd e2e/interop/metallbbuild && go build -o DIR go.universe.tf/metallb/speaker)")
	}
	if os.Geteuid() != 0 {
		t.Skip("interop: TestRealMetalLBSpeaker needs root (network namespaces)")
	}
	testbed.RequireCommand(t, "ip", "arping")
	svcnet := os.Getenv("SVCNET_BIN")
	if svcnet == "" {
		svcnet = buildSvcnet(t)
	}
	var real, ours map[string]any
	t.Run("metallb-speaker", func(t *testing.T) {
		real = runSpeakerScenario(t, svcnet, func(t *testing.T, node *testbed.NetNS, name, kubeconfig, logPath string) {
			startLoggedEnv(t, node, logPath, []string{"KUBECONFIG=" + kubeconfig},
				mlb, "--node-name", name, "--pod-name", "speaker-"+name, "--namespace", "metallb-system",
				"--port", "17472", "--log-level", "info")
		})
	})
	t.Run("svcnet-speaker", func(t *testing.T) {
		ours = runSpeakerScenario(t, svcnet, func(t *testing.T, node *testbed.NetNS, name, kubeconfig, logPath string) {
			startLogged(t, node, logPath, svcnet, "speaker", "--kubeconfig", kubeconfig, "--node-name", name,
				"--metrics-bind-address", "")
		})
	})
	if real == nil || ours == nil {
		t.Fatal("a scenario did not complete")
	}
	compareWritten(t, "metallb-speaker", real, ours)
}

const speakerConfig = `
apiVersion: metallb.io/v1beta1
kind: IPAddressPool
metadata: {name: everywhere, namespace: metallb-system}
spec: {addresses: [172.30.0.200-172.30.0.209]}
---
apiVersion: metallb.io/v1beta1
kind: L2Advertisement
metadata: {name: everywhere, namespace: metallb-system}
spec: {ipAddressPools: [everywhere]}
---
apiVersion: metallb.io/v1beta1
kind: IPAddressPool
metadata: {name: labelled, namespace: metallb-system, labels: {zone: b}}
spec: {addresses: [172.30.0.210-172.30.0.214]}
---
apiVersion: metallb.io/v1beta1
kind: L2Advertisement
metadata: {name: labelled, namespace: metallb-system}
spec:
  ipAddressPoolSelectors: [{matchLabels: {zone: b}}]
  nodeSelectors: [{matchLabels: {l2: "yes"}}]
---
apiVersion: metallb.io/v1beta1
kind: IPAddressPool
metadata: {name: wrong-iface, namespace: metallb-system}
spec: {addresses: [172.30.0.215-172.30.0.216]}
---
apiVersion: metallb.io/v1beta1
kind: L2Advertisement
metadata: {name: wrong-iface, namespace: metallb-system}
spec: {ipAddressPools: [wrong-iface], interfaces: [eth9]}
---
apiVersion: metallb.io/v1beta1
kind: IPAddressPool
metadata: {name: silent, namespace: metallb-system}
spec: {addresses: [172.30.0.220-172.30.0.221]}
---
apiVersion: metallb.io/v1beta1
kind: IPAddressPool
metadata: {name: routed, namespace: metallb-system}
spec: {addresses: [10.99.0.0/28]}
---
apiVersion: metallb.io/v1beta1
kind: BGPAdvertisement
metadata: {name: routed, namespace: metallb-system}
spec:
  ipAddressPools: [routed]
  communities: ["64512:100", "64512:200"]
---
apiVersion: metallb.io/v1beta1
kind: BGPAdvertisement
metadata: {name: routed-aggregate, namespace: metallb-system}
spec:
  ipAddressPools: [routed]
  aggregationLength: 30
  nodeSelectors: [{matchLabels: {l2: "yes"}}]
---
apiVersion: metallb.io/v1beta2
kind: BGPPeer
metadata: {name: router, namespace: metallb-system}
spec: {myASN: 64512, peerASN: 64500, peerAddress: 172.30.0.1, holdTime: 9s}
`

// speakerService is one LoadBalancer Service of the scenario and where
// its endpoints are.
type speakerService struct {
	name, pool string
	local      bool
	// readyOn are the nodes with a ready endpoint; notReadyOn with one
	// that is not ready.
	readyOn, notReadyOn []string
}

var speakerServices = []speakerService{
	{name: "web-1", pool: "everywhere", readyOn: []string{"node-1", "node-2", "node-3"}},
	{name: "web-2", pool: "everywhere", readyOn: []string{"node-1", "node-2", "node-3"}},
	{name: "web-3", pool: "everywhere", readyOn: []string{"node-1", "node-2"}},
	{name: "web-4", pool: "everywhere", readyOn: []string{"node-3"}},
	{name: "local-3", pool: "everywhere", local: true, readyOn: []string{"node-3"}, notReadyOn: []string{"node-2"}},
	{name: "local-1", pool: "everywhere", local: true, readyOn: []string{"node-1"}},
	{name: "unready", pool: "everywhere", notReadyOn: []string{"node-2"}},
	{name: "zone-b-1", pool: "labelled", readyOn: []string{"node-1", "node-2", "node-3"}},
	{name: "zone-b-2", pool: "labelled", readyOn: []string{"node-1", "node-2", "node-3"}},
	{name: "zone-b-3", pool: "labelled", readyOn: []string{"node-1"}},
	{name: "iface", pool: "wrong-iface", readyOn: []string{"node-1", "node-2"}},
	{name: "quiet", pool: "silent", readyOn: []string{"node-1"}},
	{name: "routed-1", pool: "routed", readyOn: []string{"node-1", "node-2", "node-3"}},
	{name: "routed-local", pool: "routed", local: true, readyOn: []string{"node-3"}},
	{name: "routed-unready", pool: "routed", notReadyOn: []string{"node-2"}},
}

// runSpeakerScenario builds the node network (a lab namespace with a
// bridge, the API server on it and lbipam; three node namespaces and a
// client on the bridge; no route out of any), writes the input, lets
// start run one speaker per node, and returns the normalized results
// once they are stable.
func runSpeakerScenario(t *testing.T, svcnet string, start func(t *testing.T, node *testbed.NetNS, name, kubeconfig, logPath string)) map[string]any {
	began := time.Now()
	lab := testbed.NewNetNS(t, "mlbsp")
	lab.MustRun("ip", "link", "add", "br0", "type", "bridge")
	lab.MustRun("ip", "addr", "add", "172.30.0.1/24", "dev", "br0")
	lab.MustRun("ip", "link", "set", "br0", "up")
	attach := func(ns *testbed.NetNS, port, addr string) {
		testbed.Link(t, lab, port, "", ns, "eth0", addr)
		lab.MustRun("ip", "link", "set", port, "master", "br0")
	}
	nodes := map[string]*testbed.NetNS{}
	macs := map[string]string{} // MAC -> node
	for i, name := range []string{"node-1", "node-2", "node-3"} {
		ns := testbed.NewNetNS(t, "mlbsp-n")
		attach(ns, fmt.Sprintf("p%d", i+1), fmt.Sprintf("172.30.0.%d/24", 11+i))
		nodes[name] = ns
		mac := strings.TrimSpace(ns.MustRun("cat", "/sys/class/net/eth0/address"))
		macs[strings.ToLower(mac)] = name
	}
	client := testbed.NewNetNS(t, "mlbsp-c")
	attach(client, "pc", "172.30.0.100/24")
	bird := startBird(t, lab)

	data := t.TempDir()
	ctx, kubeconfig, cs, dc := startAPIServer(t, lab, svcnet, data, "--bind-address", "172.30.0.1", "--service-cluster-ip-range", "10.96.0.0/16")
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "metallb-system"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// No controllers run but lbipam: the speakers' pods need their service
	// account made by hand.
	if _, err := cs.CoreV1().ServiceAccounts("metallb-system").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	nodeLabels := map[string]map[string]string{
		"node-1": {"l2": "no", corev1.LabelNodeExcludeBalancers: ""},
		"node-2": {"l2": "yes"},
		"node-3": {"l2": "yes"},
	}
	for i, name := range []string{"node-1", "node-2", "node-3"} {
		l := map[string]string{"kubernetes.io/hostname": name}
		for k, v := range nodeLabels[name] {
			l[k] = v
		}
		n, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
		n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: fmt.Sprintf("172.30.0.%d", 11+i)}}
		if _, err := cs.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		// MetalLB's speaker owns its status objects by its Pod.
		if _, err := cs.CoreV1().Pods("metallb-system").Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "speaker-" + name, Labels: map[string]string{"app": "metallb", "component": "speaker"}},
			Spec:       corev1.PodSpec{NodeName: name, HostNetwork: true, Containers: []corev1.Container{{Name: "speaker", Image: "quay.io/metallb/speaker:v0.15.2"}}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, doc := range strings.Split(speakerConfig, "\n---\n") {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			t.Fatal(err)
		}
		gvr := map[string]schema.GroupVersionResource{
			"IPAddressPool":    poolsGVR,
			"L2Advertisement":  {Group: "metallb.io", Version: "v1beta1", Resource: "l2advertisements"},
			"BGPAdvertisement": {Group: "metallb.io", Version: "v1beta1", Resource: "bgpadvertisements"},
			"BGPPeer":          {Group: "metallb.io", Version: "v1beta2", Resource: "bgppeers"},
		}[u.GetKind()]
		if _, err := dc.Resource(gvr).Namespace("metallb-system").Create(ctx, u, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create %s %s: %v", u.GetKind(), u.GetName(), err)
		}
	}
	lab.Start(svcnet, "controllers", "--kubeconfig", kubeconfig, "--controllers", "lbipam", "--leader-elect=false", "--metrics-bind-address", "")
	for _, name := range []string{"node-1", "node-2", "node-3"} {
		logPath := filepath.Join(data, "speaker-"+name+".log")
		start(t, nodes[name], name, kubeconfig, logPath)
		t.Cleanup(func() {
			b, _ := os.ReadFile(logPath)
			if t.Failed() {
				t.Logf("%s's speaker log:\n%s", name, tail(string(b), 40))
			}
			if dir := os.Getenv("SVCNET_METALLB_DUMP"); dir != "" {
				_ = os.WriteFile(filepath.Join(dir, strings.ReplaceAll(t.Name(), "/", "_")+"-"+name+".log"), b, 0o644)
			}
		})
	}

	// The speakers settle (caches synced, BGP sessions up, svcnet's
	// speakers joined) before the Services appear, so that what is
	// compared is their decisions, not how each starts up.
	time.Sleep(10 * time.Second)
	for _, s := range speakerServices {
		createSpeakerService(t, ctx, cs, s)
	}
	addrs := map[string]string{}
	waitFor(t, 60*time.Second, "every Service's address", func() error {
		for _, s := range speakerServices {
			svc, err := cs.CoreV1().Services("default").Get(ctx, s.name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if len(svc.Status.LoadBalancer.Ingress) == 0 {
				return fmt.Errorf("%s has no address yet", s.name)
			}
			addrs[s.name] = svc.Status.LoadBalancer.Ingress[0].IP
		}
		return nil
	})

	return stableDump(t, began, 120*time.Second, 2*time.Second, "announcements", func() (map[string]any, error) {
		return dumpSpeakers(ctx, cs, dc, client, bird, addrs, macs)
	})
}

func createSpeakerService(t *testing.T, ctx context.Context, cs kubernetes.Interface, s speakerService) {
	t.Helper()
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: s.name, Annotations: map[string]string{"metallb.io/address-pool": s.pool}},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer,
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}},
	}
	if s.local {
		svc.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	}
	if _, err := cs.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: s.name + "-1", Labels: map[string]string{discoveryv1.LabelServiceName: s.name, discoveryv1.LabelManagedBy: "interop-test"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptrTo("http"), Port: ptrTo(int32(8080)), Protocol: ptrTo(corev1.ProtocolTCP)}},
	}
	n := 0
	add := func(nodes []string, ready bool) {
		for _, node := range nodes {
			n++
			slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{
				Addresses:  []string{fmt.Sprintf("10.244.%d.%d", n, len(s.name))},
				Conditions: discoveryv1.EndpointConditions{Ready: ptrTo(ready), Serving: ptrTo(ready), Terminating: ptrTo(false)},
				NodeName:   ptrTo(node),
			})
		}
	}
	add(s.readyOn, true)
	add(s.notReadyOn, false)
	if _, err := cs.DiscoveryV1().EndpointSlices("default").Create(ctx, slice, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

var arpReplyRE = regexp.MustCompile(`(?i)reply from [0-9.]+ \[([0-9a-f:]+)\]`)

// dumpSpeakers is what the speakers did, normalized: per Service the
// nodes whose MAC answers ARP for its address, its ServiceL2Statuses and
// the speakers' events on it (reasons other than those of lbipam).
func dumpSpeakers(ctx context.Context, cs kubernetes.Interface, dc dynamic.Interface, client *testbed.NetNS, bird *birdLab, addrs, macs map[string]string) (map[string]any, error) {
	out := map[string]any{}
	sts, err := dc.Resource(l2StatusGVR).Namespace("metallb-system").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	statuses := map[string][]string{}
	for _, st := range sts.Items {
		l := st.GetLabels()
		node, _, _ := unstructured.NestedString(st.Object, "status", "node")
		svcName, _, _ := unstructured.NestedString(st.Object, "status", "serviceName")
		ifaces, _, _ := unstructured.NestedSlice(st.Object, "status", "interfaces")
		var names []string
		for _, i := range ifaces {
			if m, ok := i.(map[string]any); ok {
				names = append(names, fmt.Sprint(m["name"]))
			}
		}
		sort.Strings(names)
		k := l["metallb.io/service-namespace"] + "/" + l["metallb.io/service-name"]
		statuses[k] = append(statuses[k], fmt.Sprintf("%s name=%s* node=%s (label %s) service=%s interfaces=%v",
			st.GetNamespace(), st.GetGenerateName(), node, l["metallb.io/node"], svcName, names))
	}
	evs, err := cs.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.kind=Service"})
	if err != nil {
		return nil, err
	}
	events := map[string][]string{}
	for _, e := range evs.Items {
		if e.Reason == "IPAllocated" || e.Reason == "AllocationFailed" {
			continue
		}
		line := e.Type + " " + e.Reason + ": " + e.Message
		k := e.InvolvedObject.Name
		if !containsString(events[k], line) {
			events[k] = append(events[k], line)
		}
	}
	bgpSts, err := dc.Resource(bgpStatusGVR).Namespace("metallb-system").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for _, st := range bgpSts.Items {
		l := st.GetLabels()
		node, _, _ := unstructured.NestedString(st.Object, "status", "node")
		svcName, _, _ := unstructured.NestedString(st.Object, "status", "serviceName")
		peers, _, _ := unstructured.NestedStringSlice(st.Object, "status", "peers")
		sort.Strings(peers)
		k := l["metallb.io/service-namespace"] + "/" + l["metallb.io/service-name"]
		statuses[k] = append(statuses[k], fmt.Sprintf("BGP %s name=%s* node=%s (label %s) service=%s peers=%v",
			st.GetNamespace(), st.GetGenerateName(), node, l["metallb.io/node"], svcName, peers))
	}
	out["bgp protocols"] = bird.sessions()
	for _, prefix := range []string{"10.99.0.0/28", "10.99.0.0/30"} {
		out["route "+prefix] = bird.routes(prefix)
	}
	for _, s := range speakerServices {
		ip := addrs[s.name]
		if s.pool == "routed" {
			out["route "+ip+"/32"] = bird.routes(ip + "/32")
			st := statuses["default/"+s.name]
			sort.Strings(st)
			ev := events[s.name]
			sort.Strings(ev)
			out["Service "+s.name] = map[string]any{"serviceBGPStatus": st, "events": ev}
			continue
		}
		arp, _ := client.Run("arping", "-c", "2", "-w", "3", "-I", "eth0", ip)
		var answering []string
		for _, m := range arpReplyRE.FindAllStringSubmatch(arp, -1) {
			node := macs[strings.ToLower(m[1])]
			if node == "" {
				node = "unknown MAC " + m[1]
			}
			if !containsString(answering, node) {
				answering = append(answering, node)
			}
		}
		sort.Strings(answering)
		st := statuses["default/"+s.name]
		sort.Strings(st)
		ev := events[s.name]
		sort.Strings(ev)
		out["Service "+s.name] = map[string]any{"arp": answering, "serviceL2Status": st, "events": ev}
	}
	return out, nil
}
