package seeds

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/svcnet/svcnet/internal/testbed"
)

// modes are the proxy modes the issue asks for, in the order they run.
var modes = []string{"iptables", "nftables", "userspace"}

// registered lists the proxy modes the built binary registers (from
// `svcnet proxy --help`: "(registered: a, b)").
func registered(t *testing.T) []string {
	out, _ := runCmd(10*time.Second, "", bin, "proxy", "--help")
	m := regexp.MustCompile(`registered: ([a-z, ]+)\)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("svcnet proxy --help names no registered modes:\n%s", out)
	}
	return strings.Split(m[1], ", ")
}

// TestSeeds starts one cluster per proxy mode and walks the seeds through it.
func TestSeeds(t *testing.T) {
	testbed.RequireRoot(t)
	testbed.RequireCommand(t, "ip", "nsenter", "kubectl", "curl", "dig", "nslookup")
	if testing.Short() || bin == "" {
		t.Skip("builds the binary and runs a 3-node cluster per proxy mode")
	}
	reg := registered(t)
	want := modes
	if env := os.Getenv("SVCNET_E2E_MODES"); env != "" {
		want = strings.Split(env, ",")
	}
	for _, mode := range want {
		t.Run(mode, func(t *testing.T) {
			// The modes' clusters are independent (own lab namespace, own
			// prefix): run them side by side.
			t.Parallel()
			if !slices.Contains(reg, mode) {
				t.Skipf("proxy mode %s is not registered in cmd/svcnet (registered: %s): its package is not imported by cmd/svcnet/proxy.go", mode, strings.Join(reg, ", "))
			}
			c := startCluster(t, mode)
			for _, sc := range scenarios {
				ok := t.Run(sc.name, func(t *testing.T) {
					sc.run(&scenario{T: t, c: c, name: sc.name})
				})
				if !ok && sc.gate {
					t.Fatalf("scenario %q failed in mode %s; later scenarios build on it", sc.name, mode)
				}
			}
		})
	}
}

// scenarios run in this order against one cluster; gate marks those later
// ones depend on.
var scenarios = []struct {
	name string
	gate bool
	run  func(s *scenario)
}{
	{"00-ready-means-usable", false, readyMeansUsable},
	{"01-walkthrough-deploy-svc-curl", true, walkthrough},
	{"03-named-ports-describe-endpoints", true, namedPorts},
	{"14-hairpin-pod-reaches-itself", false, hairpin},
	{"16-node-exec", false, nodeExec},
	{"17-svcnet-kubectl", false, builtinKubectl},
	{"07-discovery-env-resolv-dns", false, discovery},
	{"08-nodeport", false, nodePort},
	{"18-dual-stack", false, dualStack},
	{"04-v2-joins", false, v2Joins},
	{"06-fixed-clusterip", false, fixedClusterIP},
	{"02-multi-port", false, multiPort},
	{"05-selectorless-external-host", false, selectorless},
	{"10-externalname-cname", false, externalName},
	{"09-metallb-loadbalancer", false, loadBalancer},
	{"13-proxy-rules-structure", false, ruleStructure},
	{"11-seed001-extras", false, seed001},
	{"12-seed002-traffic-policies", false, seed002},
	{"15-networkpolicy", false, networkPolicy},
	{"19-topology-and-weights", false, topologyAndWeights},
	{"20-kube-proxy-configmap", false, kubeProxyConfig},
	{"21-host-network-pod", false, hostNetworkPod},
	{"22-service-account-token", false, serviceAccountPod},
	{"23-ingress-cookie-affinity", false, ingressCookieAffinity},
	{"24-init-containers-wait-for-services", false, initContainersWaitForServices},
}

// 0 (issue 17): first thing after the export line, a Deployment and its
// Service applied at once answer by name from a pod within 2 s of the
// rollout finishing, and the pod's first DNS lookup succeeds.
func readyMeansUsable(s *scenario) {
	s.apply("ready.yaml")
	// A pod of the Deployment starts asking for the Service by name as soon
	// as it runs, and prints the time of the first answer; kubectl's own
	// start-up time is not counted against the cluster.
	var pod string
	s.eventually(60*time.Second, "an early pod runs", func() ([]string, string, bool) {
		names, _ := s.podsOf("app=early")
		if len(names) > 0 {
			pod = names[0]
		}
		return []string{"kubectl get pods -l app=early"}, strings.Join(names, " "), pod != ""
	})
	loop := `for i in $(seq 600); do if curl -sS -m 1 http://early/ 2>&1; then date +%s.%N; exit 0; fi; sleep 0.05; done; exit 1`
	cmd := []string{"kubectl exec " + pod + " -- sh -c", loop}
	type result struct {
		out string
		err error
	}
	res := make(chan result, 1)
	go func() {
		out, err := s.c.inPod("default", pod, "sh", "-c", loop)
		res <- result{out, err}
	}()
	s.kubectl("rollout", "status", "deployment/early", "--timeout=90s")
	done := time.Now()
	r := <-res
	out := r.out
	if r.err != nil {
		s.failf(cmd, out, r.err, "the Service never answered by name")
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	at, perr := strconv.ParseFloat(lines[len(lines)-1], 64)
	if perr != nil || !strings.Contains(out, "Hello Kubernetes bootcamp! | Running on: early-") {
		s.failf(cmd, out, perr, "want the bootcamp greeting and a time")
	}
	lat := time.Unix(0, int64(at*1e9)).Sub(done)
	s.Logf("mode %s: the Service answered by name %v after the rollout finished (negative: before)", s.c.mode, lat.Round(time.Millisecond))
	if lat > 2*time.Second {
		s.errorf(cmd, out, "the Service answered %v after the rollout finished; want within 2s", lat)
	}
	// First try, no retry, from the pod that has not asked anything yet.
	names, _ := s.podsOf("app=early")
	other := names[0]
	for _, n := range names {
		if n != pod {
			other = n
		}
	}
	nsl := []string{"nslookup", "kubernetes.default"}
	out, err := s.c.inPod("default", other, nsl...)
	if err != nil || !regexp.MustCompile(`Name:\s+kubernetes\.default\.svc\.cluster\.local\nAddress: 10\.96\.0\.1\n`).MatchString(out) {
		s.failf(nsl, out, err, "want kubernetes.default.svc.cluster.local 10.96.0.1 on the first try")
	}
	s.kubectl("delete", "-f", mustAbs("testdata/ready.yaml"), "--wait=false")
}

// 1: Deployment myapp 3/3, Service myapp, curls reach all three pods.
func walkthrough(s *scenario) {
	s.apply("myapp-deploy.yaml")
	s.eventually(90*time.Second, "deployment myapp 3/3", func() ([]string, string, bool) {
		args := []string{"get", "deploy", "myapp", "-o", "wide"}
		out, _ := s.c.kubectl(args...)
		return append([]string{"kubectl"}, args...), out,
			regexp.MustCompile(`(?m)^myapp\s+3/3\s+3\s+3\s+\S+\s+myapp\s+jocatalin/kubernetes-bootcamp:v1\s+app=myapp,version=v1$`).MatchString(out)
	})
	names, _ := s.waitPods("app=myapp", 3)
	s.apply("myapp-svc.yaml")
	out := s.kubectl("get", "svc", "myapp", "-o", "wide")
	if !regexp.MustCompile(`(?m)^NAME\s+TYPE\s+CLUSTER-IP\s+EXTERNAL-IP\s+PORT\(S\)\s+AGE\s+SELECTOR\n` +
		`myapp\s+ClusterIP\s+10\.96\.3\.215\s+<none>\s+38080/TCP\s+\S+\s+app=myapp$`).MatchString(out) {
		s.errorf([]string{"kubectl get svc myapp -o wide"}, out, "columns differ from the seed's")
	}
	// The proxy needs a moment for the endpoints; then every pod answers.
	s.eventually(30*time.Second, "the ClusterIP answers", func() ([]string, string, bool) {
		out, err := s.c.onNode(1, "curl", "-sS", "-m", "2", "10.96.3.215:38080")
		return []string{"curl 10.96.3.215:38080"}, out, err == nil
	})
	var want []string
	for _, n := range names {
		want = append(want, "Hello Kubernetes bootcamp! | Running on: "+n+" | v=1")
	}
	s.curlSpread(1, "10.96.3.215:38080", want, 60)
}

// 14 (issue 17): each of three replicas curls its own Service 30 times and
// gets 30 answers from three distinct pods, itself included: the packets the
// proxy sends back to the pod they came from leave the node bridge by the
// port they came in (hairpin mode).
func hairpin(s *scenario) {
	s.apply("hairpin.yaml")
	names, _ := s.waitPods("app=hairpin", 3)
	ip := strings.TrimSpace(s.kubectl("get", "svc", "hairpin", "-o", "jsonpath={.spec.clusterIP}"))
	s.eventually(30*time.Second, "the hairpin Service has its three endpoints", func() ([]string, string, bool) {
		args := []string{"get", "endpointslices", "-l", "kubernetes.io/service-name=hairpin", "-o", "jsonpath={.items[*].endpoints[*].addresses[0]}"}
		out, _ := s.c.kubectl(args...)
		return append([]string{"kubectl"}, args...), out, len(strings.Fields(out)) == 3
	})
	// Let every node's proxy program the endpoints (the rollout's network
	// programming latency is another issue's subject).
	time.Sleep(3 * time.Second)
	loop := "for i in $(seq 30); do curl -sS -m 2 http://" + ip + "/ 2>&1 | head -c 200; echo; done"
	for _, pod := range names {
		out, err := s.c.inPod("default", pod, "sh", "-c", loop)
		cmd := []string{"kubectl exec " + pod + " -- sh -c", loop}
		if err != nil {
			s.failf(cmd, out, err, "the loop failed in pod %s", pod)
		}
		from := map[string]int{}
		answers := 0
		for _, line := range strings.Split(out, "\n") {
			if m := regexp.MustCompile(`^Hello Kubernetes bootcamp! \| Running on: (\S+) \| v=1$`).FindStringSubmatch(line); m != nil {
				from[m[1]]++
				answers++
			}
		}
		if answers != 30 || len(from) != 3 || from[pod] == 0 {
			s.errorf(cmd, out, "pod %s: want 30 answers from 3 distinct pods including itself; got %d answers from %v", pod, answers, from)
		}
	}
	s.kubectl("delete", "-f", mustAbs("testdata/hairpin.yaml"), "--wait=false")
}

// 16 (issue 17): svcnet node-exec runs a command on a node, by the name
// kubectl shows, and passes its exit code on.
func nodeExec(s *scenario) {
	worker := s.c.nodeName(2)
	var cmd []string
	var want string
	switch s.c.mode {
	case "iptables":
		cmd, want = []string{"iptables-save", "-t", "nat"}, "-A KUBE-SERVICES"
	case "nftables":
		cmd, want = []string{"nft", "list", "table", "ip", "kube-proxy"}, "chain services"
	default:
		cmd, want = []string{"iptables-save", "-t", "nat"}, "KUBE-PORTALS"
	}
	full := append([]string{bin, "node-exec", "--data-dir", s.c.dir, worker, "--"}, cmd...)
	out, err := runCmd(30*time.Second, "", full...)
	record(s.c.mode+" machine", full[1:], out)
	if err != nil || !strings.Contains(out, want) {
		s.failf(full, out, err, "want the node's rules (%q)", want)
	}
	full = []string{bin, "node-exec", "--data-dir", s.c.dir, worker, "--", "ip", "-4", "-o", "addr", "show", "eth0"}
	if out, err := runCmd(30*time.Second, "", full...); err != nil || !strings.Contains(out, " "+nodeIP(2)+"/24 ") {
		s.failf(full, out, err, "want the worker's address %s", nodeIP(2))
	}
	full = []string{bin, "node-exec", "--data-dir", s.c.dir, worker, "--", "sh", "-c", "exit 3"}
	out, err = runCmd(30*time.Second, "", full...)
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 {
		s.failf(full, out, err, "want exit code 3")
	}
	full = []string{bin, "node-exec", "--data-dir", s.c.dir, "no-such-node", "--", "true"}
	out, err = runCmd(30*time.Second, "", full...)
	if err == nil || !strings.Contains(out, `node "no-such-node" not found; the nodes are: `+s.c.nodeName(1)+", "+s.c.nodeName(2)) {
		s.failf(full, out, err, "want an error naming the nodes")
	}
	// No command: an interactive shell (here reading from a pipe).
	sh := exec.Command(bin, "node-exec", "--data-dir", s.c.dir, worker)
	sh.Env = append(os.Environ(), "SHELL=/bin/sh")
	sh.Stdin = strings.NewReader("echo on $SVCNET_NODE; ip -4 -o addr show eth0\n")
	out2, err := sh.CombinedOutput()
	if err != nil || !strings.Contains(string(out2), "on "+worker) || !strings.Contains(string(out2), nodeIP(2)+"/24") {
		s.failf([]string{"svcnet node-exec " + worker + " <<< 'echo on $SVCNET_NODE; ip -4 -o addr show eth0'"}, string(out2), err, "want a shell on the node")
	}
}

// 17 (issue 17): the kubectl built into svcnet, as `svcnet kubectl` and
// through a link named kubectl, talks to the cluster like the real one.
func builtinKubectl(s *scenario) {
	link := filepath.Join(s.TempDir(), "kubectl")
	if err := os.Symlink(bin, link); err != nil {
		s.Fatal(err)
	}
	for _, argv := range [][]string{{bin, "kubectl"}, {link}} {
		full := append(append([]string{"ip", "netns", "exec", s.c.lab.Name}, argv...), "--kubeconfig", s.c.kubecfg, "get", "nodes", "-o", "name")
		out, err := runCmd(60*time.Second, "", full...)
		if err != nil || !strings.Contains(out, "node/"+s.c.nodeName(2)+"\n") {
			s.failf(full, out, err, "want the nodes")
		}
		full = append(argv, "version", "--client")
		out, err = runCmd(60*time.Second, "", full...)
		if err != nil || !strings.HasPrefix(out, "Client Version: v") {
			s.failf(full, out, err, "want kubectl's client version")
		}
		// kubectl's own errors and exit code.
		full = append(append([]string{"ip", "netns", "exec", s.c.lab.Name}, argv...), "--kubeconfig", s.c.kubecfg, "get", "svc", "no-such-svc")
		out, err = runCmd(60*time.Second, "", full...)
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(out, `Error from server (NotFound): services "no-such-svc" not found`) {
			s.failf(full, out, err, "want kubectl's NotFound error and exit code 1")
		}
	}
}

func mustAbs(p string) string {
	abs, err := filepath.Abs(p)
	if err != nil {
		panic(err)
	}
	return abs
}

// 3: named container port and targetPort; describe and endpoints list the
// three pods on 8080.
func namedPorts(s *scenario) {
	s.apply("myapp-deploy-named.yaml")
	s.apply("myapp-svc-named.yaml")
	var ips []string
	s.eventually(90*time.Second, "the rollout replaced the pods and the endpoints follow", func() ([]string, string, bool) {
		args := []string{"get", "pods", "-l", "app=myapp,version=v1", "-o", "jsonpath={range .items[*]}{.metadata.name} {.status.phase} {.spec.containers[0].ports[0].name}{\"\\n\"}{end}"}
		out, _ := s.c.kubectl(args...)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != 3 {
			return append([]string{"kubectl"}, args...), out, false
		}
		for _, l := range lines {
			if !strings.HasSuffix(l, " Running myapp-port") {
				return append([]string{"kubectl"}, args...), out, false
			}
		}
		_, ips = s.podsOf("app=myapp,version=v1")
		eargs := []string{"get", "endpoints", "myapp", "-o", "jsonpath={.subsets[*].addresses[*].ip}"}
		eout, _ := s.c.kubectl(eargs...)
		got := strings.Fields(eout)
		slices.Sort(got)
		slices.Sort(ips)
		return append([]string{"kubectl"}, eargs...), eout + "\npods: " + strings.Join(ips, " "), len(ips) == 3 && slices.Equal(got, ips)
	})
	out := s.kubectl("describe", "svc", "myapp")
	for _, re := range []string{`(?m)^Name:\s+myapp$`, `(?m)^Namespace:\s+default$`, `(?m)^Selector:\s+app=myapp$`, `(?m)^Type:\s+ClusterIP$`,
		`(?m)^IP:\s+10\.96\.3\.215$`, `(?m)^Port:\s+<unset>\s+38080/TCP$`, `(?m)^TargetPort:\s+myapp-port/TCP$`, `(?m)^Session Affinity:\s+None$`} {
		if !regexp.MustCompile(re).MatchString(out) {
			s.errorf([]string{"kubectl describe svc myapp"}, out, "no line matching %s", re)
		}
	}
	m := regexp.MustCompile(`(?m)^Endpoints:\s+(\S+)$`).FindStringSubmatch(out)
	if m == nil || !sameEndpoints(m[1], ips, "8080") {
		s.errorf([]string{"kubectl describe svc myapp"}, out, "Endpoints should be %v on 8080", ips)
	}
	out = s.kubectl("get", "endpoints", "myapp")
	m = regexp.MustCompile(`(?m)^NAME\s+ENDPOINTS\s+AGE\nmyapp\s+(\S+)\s+\S+$`).FindStringSubmatch(out)
	if m == nil || !sameEndpoints(m[1], ips, "8080") {
		s.errorf([]string{"kubectl get endpoints myapp"}, out, "ENDPOINTS should be %v on 8080", ips)
	}
	var want []string
	names, _ := s.podsOf("app=myapp,version=v1")
	for _, n := range names {
		want = append(want, "Running on: "+n+" | v=1")
	}
	s.curlSpread(1, "10.96.3.215:38080", want, 60)
}

func sameEndpoints(list string, ips []string, port string) bool {
	got := strings.Split(list, ",")
	var want []string
	for _, ip := range ips {
		want = append(want, ip+":"+port)
	}
	slices.Sort(got)
	slices.Sort(want)
	return slices.Equal(got, want)
}

// 7: service discovery from inside a pod.
func discovery(s *scenario) {
	names, _ := s.podsOf("app=myapp,version=v1")
	if len(names) == 0 {
		s.Fatalf("scenario %q, mode %s: no myapp pod", s.name, s.c.mode)
	}
	pod := names[0]
	env := s.inPod(pod, "env")
	var got []string
	for _, l := range strings.Split(env, "\n") {
		if strings.Contains(l, "MYAPP") {
			got = append(got, l)
		}
	}
	slices.Sort(got)
	want := []string{
		"MYAPP_PORT=tcp://10.96.3.215:38080",
		"MYAPP_PORT_38080_TCP=tcp://10.96.3.215:38080",
		"MYAPP_PORT_38080_TCP_ADDR=10.96.3.215",
		"MYAPP_PORT_38080_TCP_PORT=38080",
		"MYAPP_PORT_38080_TCP_PROTO=tcp",
		"MYAPP_SERVICE_HOST=10.96.3.215",
		"MYAPP_SERVICE_PORT=38080",
	}
	if !slices.Equal(got, want) {
		s.errorf([]string{"kubectl exec " + pod + " -- env | grep MYAPP"}, strings.Join(got, "\n"), "want the seed's seven variables:\n%s", strings.Join(want, "\n"))
	}
	if out := s.inPod(pod, "cat", "/etc/resolv.conf"); out != "search default.svc.cluster.local svc.cluster.local cluster.local\nnameserver 10.96.0.10\noptions ndots:5\n" {
		s.errorf([]string{"cat /etc/resolv.conf"}, out, "resolv.conf differs from the seed's")
	}
	for _, url := range []string{"http://myapp.default:38080", "http://myapp:38080", "http://myapp.default.svc.cluster.local:38080"} {
		out := s.inPod(pod, "curl", "-sS", "-m", "5", url)
		if !regexp.MustCompile(`^Hello Kubernetes bootcamp! \| Running on: myapp-\S+ \| v=1\n?$`).MatchString(out) {
			s.errorf([]string{"curl " + url}, out, "want the bootcamp greeting")
		}
	}
	out := s.inPod(pod, "nslookup", "-debug", "-type=a", "myapp")
	if !strings.Contains(out, "Server:\t\t10.96.0.10") || !regexp.MustCompile(`Name:\s+myapp\.default\.svc\.cluster\.local\nAddress: 10\.96\.3\.215`).MatchString(out) {
		s.errorf([]string{"nslookup -debug -type=a myapp"}, out, "want 10.96.0.10 to answer myapp.default.svc.cluster.local (first search domain) with 10.96.3.215")
	}
	// The other search domains do not exist (busybox's nslookup in the seed
	// shows them NXDOMAIN; ask for them directly).
	for _, name := range []string{"myapp.svc.cluster.local", "myapp.cluster.local"} {
		out, _ := s.c.inPod("default", pod, "nslookup", "-type=a", name)
		if !strings.Contains(out, "server can't find "+name+": NXDOMAIN") {
			s.errorf([]string{"nslookup -type=a " + name}, out, "want NXDOMAIN")
		}
	}
	// SRV needs a named port: the seed's port is called http.
	s.apply("myapp-svc-http.yaml")
	s.eventually(20*time.Second, "SRV answer", func() ([]string, string, bool) {
		out, _ := s.c.inPod("default", pod, "nslookup", "-type=srv", "http.tcp.myapp.default.svc.cluster.local")
		return []string{"nslookup -type=srv http.tcp.myapp.default.svc.cluster.local"}, out,
			strings.Contains(out, "http.tcp.myapp.default.svc.cluster.local\tservice = 0 100 38080 myapp.default.svc.cluster.local.")
	})
	// A Service created after the pod leaves no variables in it.
	s.kubectl("create", "service", "clusterip", "later", "--tcp=8080:8080")
	env = s.inPod(pod, "env")
	if strings.Contains(env, "LATER_") {
		s.errorf([]string{"env"}, env, "a Service created after the pod must not appear in its environment")
	}
	if !strings.Contains(env, "MYAPP_SERVICE_HOST=10.96.3.215") {
		s.errorf([]string{"env"}, env, "MYAPP_SERVICE_HOST missing")
	}
}

// 8: NodePort 30000 on every node; allocation in range; out of range refused.
func nodePort(s *scenario) {
	s.apply("myapp-svc-nodeport.yaml")
	out := s.kubectl("get", "svc", "myapp")
	if !regexp.MustCompile(`(?m)^myapp\s+NodePort\s+10\.96\.3\.215\s+<none>\s+38080:30000/TCP\s+\S+$`).MatchString(out) {
		s.errorf([]string{"kubectl get svc myapp"}, out, "want NodePort with PORT(S) 38080:30000/TCP")
	}
	// From outside the nodes (the machine hosting the node network), every
	// node's address answers.
	for i := 1; i <= nodes; i++ {
		url := nodeIP(i) + ":30000"
		s.eventually(20*time.Second, "NodePort answers on "+url, func() ([]string, string, bool) {
			out, err := s.c.onLab("curl", "-sS", "-m", "3", url)
			return []string{"curl " + url}, out, err == nil && strings.HasPrefix(out, "Hello Kubernetes bootcamp! | Running on: myapp-")
		})
	}
	// The ClusterIP still answers (NodePort is a superset of ClusterIP).
	if out, err := s.c.onNode(2, "curl", "-sS", "-m", "3", "10.96.3.215:38080"); err != nil || !strings.HasPrefix(out, "Hello Kubernetes bootcamp!") {
		s.errorf([]string{"curl 10.96.3.215:38080"}, out, "ClusterIP of a NodePort Service: %v", err)
	}
	s.apply("nodeport-auto-svc.yaml")
	np := s.kubectl("get", "svc", "myapp-np-auto", "-o", "jsonpath={.spec.ports[0].nodePort}")
	if n, err := strconv.Atoi(np); err != nil || n < 30000 || n > 32767 {
		s.errorf([]string{"kubectl get svc myapp-np-auto -o jsonpath={.spec.ports[0].nodePort}"}, np, "want a port in 30000-32767")
	}
	abs := "testdata/nodeport-out-of-range-svc.yaml"
	out = s.kubectlFails("apply", "-f", abs)
	if want := `The Service "myapp-bad-np" is invalid: spec.ports[0].nodePort: Invalid value: 40000: provided port is not in the valid range. The range of valid ports is 30000-32767`; !strings.Contains(out, want) {
		s.errorf([]string{"kubectl apply -f " + abs}, out, "want kube-apiserver's message %q", want)
	}
}

// 4: myapp2 (v2) joins the Service.
func v2Joins(s *scenario) {
	s.apply("myapp2-deploy.yaml")
	s.waitPods("app=myapp,version=v2", 1)
	s.curlSpread(1, "10.96.3.215:38080", []string{"| v=1", "| v=2"}, 80)
	s.kubectl("delete", "deploy", "myapp2", "--wait=false")
}

// 6: fixed clusterIP; one outside the range is refused.
func fixedClusterIP(s *scenario) {
	if ip := s.kubectl("get", "svc", "myapp", "-o", "jsonpath={.spec.clusterIP}"); ip != "10.96.3.215" {
		s.errorf([]string{"kubectl get svc myapp -o jsonpath={.spec.clusterIP}"}, ip, "want the fixed 10.96.3.215")
	}
	out := s.kubectlFails("apply", "-f", "testdata/clusterip-out-of-range-svc.yaml")
	// kube-apiserver 1.36 allocates ClusterIPs from ServiceCIDRs (the
	// MetaAllocator): an address in none of them is a mismatched network.
	want := `The Service "myapp-bad-ip" is invalid: spec.clusterIPs: Invalid value: ["10.97.3.215"]: failed to allocate IP 10.97.3.215: the provided network does not match the current range`
	if !strings.Contains(out, want) {
		s.errorf([]string{"kubectl apply -f testdata/clusterip-out-of-range-svc.yaml"}, out, "want kube-apiserver's message %q", want)
	}
}

// 2: multi-port Service; without names it is refused.
func multiPort(s *scenario) {
	s.apply("multiport-svc.yaml")
	out := s.kubectl("get", "svc", "myapp-multi")
	if !regexp.MustCompile(`(?m)^myapp-multi\s+ClusterIP\s+10\.96\.\d+\.\d+\s+<none>\s+38080/TCP,38083/TCP\s+\S+$`).MatchString(out) {
		s.errorf([]string{"kubectl get svc myapp-multi"}, out, "want PORT(S) 38080/TCP,38083/TCP")
	}
	ip := s.kubectl("get", "svc", "myapp-multi", "-o", "jsonpath={.spec.clusterIP}")
	s.eventually(20*time.Second, "the http port answers", func() ([]string, string, bool) {
		out, err := s.c.onNode(1, "curl", "-sS", "-m", "3", ip+":38080")
		return []string{"curl " + ip + ":38080"}, out, err == nil && strings.HasPrefix(out, "Hello Kubernetes bootcamp!")
	})
	out = s.kubectlFails("apply", "-f", "testdata/multiport-unnamed-svc.yaml")
	for _, want := range []string{`The Service "myapp-unnamed" is invalid: `, "spec.ports[0].name: Required value", "spec.ports[1].name: Required value"} {
		if !strings.Contains(out, want) {
			s.errorf([]string{"kubectl apply -f testdata/multiport-unnamed-svc.yaml"}, out, "want %q", want)
		}
	}
}

// 5: selector-less Service with hand-written Endpoints to a host outside
// the cluster.
func selectorless(s *scenario) {
	s.apply("svc-no-selector.yaml")
	ip := s.kubectl("get", "svc", "svc-no-selector", "-o", "jsonpath={.spec.clusterIP}")
	s.eventually(30*time.Second, "the ClusterIP reaches 192.0.2.10:80", func() ([]string, string, bool) {
		out, err := s.c.onNode(2, "curl", "-sS", "-m", "3", ip+":38081")
		return []string{"curl " + ip + ":38081"}, out, err == nil && strings.HasPrefix(out, "external host 192.0.2.10")
	})
	out := s.kubectl("get", "endpoints", "svc-no-selector")
	if !regexp.MustCompile(`(?m)^svc-no-selector\s+192\.0\.2\.10:80\s+\S+$`).MatchString(out) {
		s.errorf([]string{"kubectl get endpoints svc-no-selector"}, out, "want 192.0.2.10:80")
	}
}

// 10: ExternalName answers a CNAME.
func externalName(s *scenario) {
	s.apply("svc-external-name.yaml")
	out := s.kubectl("get", "svc", "svc-external-name")
	if !regexp.MustCompile(`(?m)^svc-external-name\s+ExternalName\s+<none>\s+www\.aneasystone\.com\s+<none>\s+\S+$`).MatchString(out) {
		s.errorf([]string{"kubectl get svc svc-external-name"}, out, "columns differ from the seed's")
	}
	// The CNAME itself. (An A question chases the target through the DNS
	// pods' upstream, the host's resolver, which is outside the sandbox; the
	// chase fails and, as in CoreDNS, the answer is then empty.)
	s.eventually(20*time.Second, "CNAME answer", func() ([]string, string, bool) {
		args := []string{"dig", "+time=2", "+tries=1", "-t", "CNAME", "@10.96.0.10", "svc-external-name.default.svc.cluster.local"}
		out, _ := s.c.onNode(1, args...)
		return args, out, regexp.MustCompile(`(?m)^svc-external-name\.default\.svc\.cluster\.local\.\s+\d+\s+IN\s+CNAME\s+www\.aneasystone\.com\.$`).MatchString(out)
	})
	// An A question chases the CNAME through the DNS pods' upstream: give
	// that upstream a stand-in inside the sandbox answering 203.0.113.80.
	rc, err := s.c.inPod("kube-system", "coredns-1", "cat", "/etc/resolv.conf")
	if err != nil {
		s.failf([]string{"kubectl exec -n kube-system coredns-1 -- cat /etc/resolv.conf"}, rc, err, "DNS pod's resolv.conf")
	}
	ns, ok := startStubUpstream(s.T, s.c, rc, netip.MustParseAddr("203.0.113.80"))
	if !ok {
		s.Skipf("the DNS pods' upstream %v is a loopback address (from the machine's /etc/resolv.conf); no sandbox host can stand in for it, so the CNAME chase is not tested", ns)
	}
	s.eventually(30*time.Second, "CNAME chased through the stub upstream "+ns.String(), func() ([]string, string, bool) {
		args := []string{"dig", "+time=3", "+tries=1", "@10.96.0.10", "svc-external-name.default.svc.cluster.local"}
		out, _ := s.c.onNode(1, args...)
		return args, out, regexp.MustCompile(`(?m)^svc-external-name\.default\.svc\.cluster\.local\.\s+\d+\s+IN\s+CNAME\s+www\.aneasystone\.com\.$`).MatchString(out) &&
			regexp.MustCompile(`(?m)^www\.aneasystone\.com\.\s+\d+\s+IN\s+A\s+203\.0\.113\.80$`).MatchString(out)
	})
}

// 9: MetalLB pool gives the LoadBalancer Service its EXTERNAL-IP.
func loadBalancer(s *scenario) {
	s.apply("metallb-pool.yaml")
	s.apply("lb-nginx.yaml")
	s.waitPods("app=nginx-deployment", 2)
	var ext string
	s.eventually(30*time.Second, "EXTERNAL-IP from the pool", func() ([]string, string, bool) {
		out, _ := s.c.kubectl("get", "svc", "nginx-deployment-service")
		m := regexp.MustCompile(`(?m)^nginx-deployment-service\s+LoadBalancer\s+10\.96\.\S+\s+(198\.51\.100\.(\d+))\s+8090:3\d{4}/TCP\s+\S+$`).FindStringSubmatch(out)
		if m != nil {
			n, _ := strconv.Atoi(m[2])
			if n >= 10 && n <= 20 {
				ext = m[1]
				return nil, out, true
			}
		}
		return []string{"kubectl get svc nginx-deployment-service"}, out, false
	})
	s.eventually(30*time.Second, "the EXTERNAL-IP answers from a node", func() ([]string, string, bool) {
		out, err := s.c.onNode(1, "curl", "-sS", "-m", "3", "-o", "/dev/null", "-w", "%{http_code}", ext+":8090")
		return []string{"curl " + ext + ":8090"}, out, err == nil && out == "200"
	})
	s.apply("lb-empty-pool.yaml")
	s.eventually(30*time.Second, "lb-holder takes the pool's only address", func() ([]string, string, bool) {
		out, _ := s.c.kubectl("get", "svc", "lb-holder")
		return []string{"kubectl get svc lb-holder"}, out, regexp.MustCompile(`(?m)^lb-holder\s+LoadBalancer\s+\S+\s+198\.51\.100\.30\s`).MatchString(out)
	})
	s.apply("lb-pending-svc.yaml")
	time.Sleep(3 * time.Second)
	out := s.kubectl("get", "svc", "lb-pending")
	if !regexp.MustCompile(`(?m)^lb-pending\s+LoadBalancer\s+10\.96\.\S+\s+<pending>\s+8091:3\d{4}/TCP\s+\S+$`).MatchString(out) {
		s.errorf([]string{"kubectl get svc lb-pending"}, out, "want EXTERNAL-IP <pending> with the pool exhausted")
	}
}

// 13: the proxy's rules have the seed's structure for a 3-replica nginx.
func ruleStructure(s *scenario) {
	s.apply("nginx-deploy.yaml")
	s.kubectl("expose", "deployment/nginx", "--type=ClusterIP", "--port=80")
	_, ips := s.waitPods("k8s-app=nginx", 3)
	ip := s.kubectl("get", "svc", "nginx", "-o", "jsonpath={.spec.clusterIP}")
	switch s.c.mode {
	case "iptables":
		out := s.eventually(30*time.Second, "iptables-save shows three endpoints", func() ([]string, string, bool) {
			out, _ := s.c.onNode(2, "iptables-save", "-t", "nat")
			return []string{"iptables-save -t nat"}, out, strings.Count(out, "-j DNAT") >= 3 &&
				regexp.MustCompile(`(?m)^-A KUBE-SVC-\S+ .*default/nginx.*-j KUBE-SEP-`).MatchString(out) &&
				strings.Count(grepLines(out, "default/nginx"), "DNAT") == 3
		})
		rules := grepLines(out, "default/nginx")
		// The seed's kube-proxy (2018) wrote "default/nginx: cluster IP";
		// kube-proxy 1.36 writes an unnamed port without the colon.
		m := regexp.MustCompile(`(?m)^-A KUBE-SERVICES -d ` + regexp.QuoteMeta(ip) + `/32 -p tcp -m comment --comment "default/nginx cluster IP" -m tcp --dport 80 -j (KUBE-SVC-[A-Z0-9]{16})$`).FindStringSubmatch(rules)
		if m == nil {
			s.errorf([]string{"iptables-save | grep default/nginx"}, rules, "no KUBE-SERVICES rule for the cluster IP with comment \"default/nginx cluster IP\"")
			return
		}
		svc := m[1]
		for _, p := range []string{"0.33333333349", "0.50000000000"} {
			if !regexp.MustCompile(`(?m)^-A ` + svc + ` .*-m statistic --mode random --probability ` + regexp.QuoteMeta(p) + ` -j KUBE-SEP-[A-Z0-9]{16}$`).MatchString(rules) {
				s.errorf([]string{"iptables-save | grep default/nginx"}, rules, "no %s rule with probability %s", svc, p)
			}
		}
		for _, pip := range ips {
			re := regexp.MustCompile(`(?m)^-A (KUBE-SEP-[A-Z0-9]{16}) -s ` + regexp.QuoteMeta(pip) + `/32 .*-j KUBE-MARK-MASQ$`)
			sm := re.FindStringSubmatch(rules)
			if sm == nil {
				s.errorf([]string{"iptables-save | grep default/nginx"}, rules, "no KUBE-SEP chain marking %s for masquerade", pip)
				continue
			}
			if !regexp.MustCompile(`(?m)^-A ` + sm[1] + ` -p tcp .*-m tcp -j DNAT --to-destination ` + regexp.QuoteMeta(pip) + `:80$`).MatchString(rules) {
				s.errorf([]string{"iptables-save | grep default/nginx"}, rules, "%s has no DNAT to %s:80", sm[1], pip)
			}
		}
	case "nftables":
		// kube-proxy 1.36's layout: the Service's chain picks and
		// translates the endpoint in one rule, through a numgen map.
		dnatMap := regexp.MustCompile(`(?m)^\s*chain service-[A-Z0-9]{8}-default/nginx/tcp/ \{\n\s*meta l4proto tcp dnat ip to numgen random mod 3 map \{ (.*) \}$`)
		out := s.eventually(30*time.Second, "nft table shows the service", func() ([]string, string, bool) {
			out, _ := s.c.onNode(2, "nft", "list", "table", "ip", "kube-proxy")
			return []string{"nft list table ip kube-proxy"}, out, strings.Contains(out, ip+" . tcp . 80 : goto service-") && dnatMap.MatchString(out)
		})
		if !regexp.MustCompile(`ip daddr . meta l4proto . th dport vmap @service-ips`).MatchString(out) ||
			!strings.Contains(out, ip+" . tcp . 80 : goto service-") {
			s.errorf([]string{"nft list table ip kube-proxy"}, out, "no service-ips map entry for %s tcp 80", ip)
		}
		var entries string
		if m := dnatMap.FindStringSubmatch(out); m != nil {
			entries = m[1]
		}
		for _, pip := range ips {
			if !strings.Contains(entries, pip+" . 80") {
				s.errorf([]string{"nft list table ip kube-proxy"}, out, "the nginx Service's numgen map has no entry for %s . 80", pip)
			}
		}
	case "userspace":
		// kube-proxy's original mode (the seed's "userspace"): the ClusterIP
		// is REDIRECTed to the proxy's own port, for pods/other hosts
		// (KUBE-PORTALS-CONTAINER) and for the node itself (KUBE-PORTALS-HOST).
		out := s.eventually(30*time.Second, "iptables-save shows the portal rules", func() ([]string, string, bool) {
			out, _ := s.c.onNode(2, "iptables-save", "-t", "nat")
			return []string{"iptables-save -t nat"}, out, strings.Contains(grepLines(out, "default/nginx"), "REDIRECT")
		})
		rules := grepLines(out, "default/nginx")
		for _, chain := range []string{"KUBE-PORTALS-CONTAINER", "KUBE-PORTALS-HOST"} {
			ok := false
			for _, l := range strings.Split(rules, "\n") {
				ok = ok || strings.HasPrefix(l, "-A "+chain+" ") && strings.Contains(l, "-d "+ip+"/32") && strings.Contains(l, "--dport 80 ") &&
					regexp.MustCompile(`-j REDIRECT --to-ports \d+$`).MatchString(l)
			}
			if !ok {
				s.errorf([]string{"iptables-save -t nat | grep default/nginx"}, rules, "no %s rule redirecting %s:80 to the proxy", chain, ip)
			}
		}
	default:
		s.Skipf("scenario %q: no rule structure known for mode %s", s.name, s.c.mode)
	}
	// nginx serves its own page through the ClusterIP.
	s.eventually(20*time.Second, "nginx answers through the ClusterIP", func() ([]string, string, bool) {
		out, err := s.c.onNode(1, "curl", "-sS", "-m", "3", "-o", "/dev/null", "-w", "%{http_code}", ip+":80")
		return []string{"curl " + ip}, out, err == nil && out == "200"
	})
}

// grepLines keeps the lines that name the Service sub exactly (sub followed
// by a quote, a space or ":", so default/nginx skips default/nginx-deployment-service).
func grepLines(text, sub string) string {
	re := regexp.MustCompile(regexp.QuoteMeta(sub) + `["\s:]`)
	var b strings.Builder
	for _, l := range strings.Split(text, "\n") {
		if re.MatchString(l) {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

// part runs one part of a scenario as its own subtest.
func (s *scenario) part(name string, f func(s *scenario)) {
	s.Run(name, func(t *testing.T) { f(&scenario{T: t, c: s.c, name: s.name + "/" + name}) })
}

// nodeOfPod returns the 1-based index of the node a pod runs on.
func (s *scenario) nodeOfPod(ns, pod string) int {
	s.Helper()
	hostIP := s.kubectl("get", "pod", "-n", ns, pod, "-o", "jsonpath={.status.hostIP}")
	for i := 1; i <= nodes; i++ {
		if nodeIP(i) == hostIP {
			return i
		}
	}
	s.Fatalf("scenario %q, mode %s: pod %s has hostIP %q, not a node's", s.name, s.c.mode, pod, hostIP)
	return 0
}

// 11: seed 001 extras.
func seed001(s *scenario) {
	s.part("externalIPs", func(s *scenario) {
		s.apply("external-ips-svc.yaml")
		// The sandbox's router sends 203.0.113.10 to node 1.
		if out, err := s.c.onLab("ip", "route", "replace", "203.0.113.10/32", "via", nodeIP(1)); err != nil {
			s.failf([]string{"ip route replace 203.0.113.10/32 via " + nodeIP(1)}, out, err, "route")
		}
		s.eventually(20*time.Second, "203.0.113.10:80 answers", func() ([]string, string, bool) {
			out, err := s.c.onLab("curl", "-sS", "-m", "3", "203.0.113.10:80")
			return []string{"curl 203.0.113.10:80"}, out, err == nil && strings.HasPrefix(out, "Hello Kubernetes bootcamp!")
		})
	})
	s.part("hostPort", func(s *scenario) {
		s.apply("hostport-pod.yaml")
		var n int
		s.eventually(60*time.Second, "my-pod Running", func() ([]string, string, bool) {
			out, _ := s.c.kubectl("get", "pod", "my-pod")
			return []string{"kubectl get pod my-pod"}, out, regexp.MustCompile(`(?m)^my-pod\s+1/1\s+Running`).MatchString(out)
		})
		n = s.nodeOfPod("default", "my-pod")
		s.eventually(20*time.Second, "NodeIP:8080 answers", func() ([]string, string, bool) {
			out, err := s.c.onLab("curl", "-sS", "-m", "3", "-o", "/dev/null", "-w", "%{http_code}", nodeIP(n)+":8080")
			return []string{"curl " + nodeIP(n) + ":8080"}, out, err == nil && out == "200"
		})
	})
	s.part("web1-web2", func(s *scenario) {
		names, _ := s.waitPods("app=nginx-deployment", 2)
		for i, p := range names {
			s.inPod(p, "sh", "-c", "echo web"+strconv.Itoa(i+1)+" > /usr/share/nginx/html/index.html")
		}
		ip := s.kubectl("get", "svc", "nginx-deployment-service", "-o", "jsonpath={.spec.clusterIP}")
		s.curlSpread(1, "http://"+ip+":8090", []string{"web1", "web2"}, 40)
	})
	s.part("port-forward", func(s *scenario) {
		// kubectl port-forward (apiserver -> node agent) from the machine
		// hosting the cluster to one of the nginx pods.
		names, _ := s.waitPods("app=nginx-deployment", 2)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		pf := exec.CommandContext(ctx, "ip", "netns", "exec", s.c.lab.Name, "kubectl", "--kubeconfig", s.c.kubecfg,
			"port-forward", "pod/"+names[0], "18090:80")
		if err := pf.Start(); err != nil {
			s.failf([]string{"kubectl port-forward pod/" + names[0] + " 18090:80"}, "", err, "start")
		}
		defer func() { cancel(); _ = pf.Wait() }()
		s.eventually(20*time.Second, "port-forward serves the pod's page", func() ([]string, string, bool) {
			out, err := s.c.onLab("curl", "-sS", "-m", "2", "http://127.0.0.1:18090/")
			return []string{"kubectl port-forward pod/" + names[0] + " 18090:80; curl 127.0.0.1:18090"}, out, err == nil && strings.HasPrefix(out, "web")
		})
	})
	s.part("logs", func(s *scenario) {
		// kubectl logs (apiserver -> node agent) shows the server's output.
		names, _ := s.podsOf("app=myapp,version=v1")
		if len(names) == 0 {
			s.failf([]string{"kubectl get pods -l app=myapp,version=v1"}, "", nil, "no myapp pod")
		}
		out := s.kubectl("logs", names[0])
		if !strings.Contains(out, "Kubernetes Bootcamp App Started At:") || !strings.Contains(out, names[0]) {
			s.errorf([]string{"kubectl logs " + names[0]}, out, "want the bootcamp server's start line naming the pod")
		}
	})
	s.part("headless", func(s *scenario) {
		s.apply("headless-svc.yaml")
		_, ips := s.waitPods("app=nginx-deployment", 2)
		slices.Sort(ips)
		dnsIP := strings.Fields(s.kubectl("get", "pods", "-n", "kube-system", "-l", "k8s-app=kube-dns", "-o", "jsonpath={.items[*].status.podIP}"))
		if len(dnsIP) == 0 {
			s.Fatalf("scenario %q, mode %s: no DNS pod IP", s.name, s.c.mode)
		}
		s.eventually(20*time.Second, "headless A records", func() ([]string, string, bool) {
			args := []string{"dig", "+short", "+time=2", "+tries=1", "@" + dnsIP[0], "nginx-headless.default.svc.cluster.local"}
			out, _ := s.c.onNode(1, args...)
			got := strings.Fields(out)
			slices.Sort(got)
			return args, out, slices.Equal(got, ips)
		})
	})
	s.part("sessionAffinity-ClientIP", func(s *scenario) {
		s.apply("affinity-svc.yaml")
		ip := s.kubectl("get", "svc", "my-service", "-o", "jsonpath={.spec.clusterIP}")
		s.eventually(20*time.Second, "my-service answers", func() ([]string, string, bool) {
			out, err := s.c.onNode(1, "curl", "-sS", "-m", "3", ip+":80")
			return []string{"curl " + ip}, out, err == nil
		})
		seen := map[string]bool{}
		var all []string
		for i := 0; i < 15; i++ {
			out, err := s.c.onNode(1, "curl", "-sS", "-m", "3", ip+":80")
			if err != nil {
				s.failf([]string{"curl " + ip}, out, err, "curl")
			}
			seen[strings.TrimSpace(out)] = true
			all = append(all, strings.TrimSpace(out))
		}
		if len(seen) != 1 {
			s.errorf([]string{"curl " + ip + " (15 times from node 1)"}, strings.Join(all, "\n"), "ClientIP affinity should keep one client on one pod")
		}
	})
	s.part("ipvs-scheduler-annotation", func(s *scenario) {
		s.apply("scheduler-svc.yaml")
		if s.c.mode == "iptables" {
			// iptables can only pick endpoints at random: it says so on the
			// Service instead of silently ignoring the annotation.
			s.eventually(30*time.Second, "describe shows the UnsupportedScheduler warning", func() ([]string, string, bool) {
				out, _ := s.c.kubectl("describe", "svc", "myapp-sh")
				return []string{"kubectl describe svc myapp-sh"}, out, regexp.MustCompile(`Warning\s+UnsupportedScheduler\s+.*iptables proxy mode cannot balance with scheduler "sh"`).MatchString(out)
			})
			return
		}
		ip := s.kubectl("get", "svc", "myapp-sh", "-o", "jsonpath={.spec.clusterIP}")
		s.eventually(20*time.Second, "myapp-sh answers", func() ([]string, string, bool) {
			out, err := s.c.onNode(1, "curl", "-sS", "-m", "3", ip+":80")
			return []string{"curl " + ip}, out, err == nil
		})
		// Source hashing: every connection from node 1 lands on one pod
		// (round robin, the default, would visit all three).
		seen := map[string]bool{}
		var all []string
		for i := 0; i < 9; i++ {
			out, err := s.c.onNode(1, "curl", "-sS", "-m", "3", ip+":80")
			if err != nil {
				s.failf([]string{"curl " + ip}, out, err, "curl")
			}
			seen[strings.TrimSpace(out)] = true
			all = append(all, strings.TrimSpace(out))
		}
		if len(seen) != 1 {
			s.errorf([]string{"curl " + ip + " (9 times from node 1)"}, strings.Join(all, "\n"), "scheduler sh should keep one client on one pod")
		}
	})
	s.part("cross-namespace", func(s *scenario) {
		s.apply("cross-namespace.yaml")
		names, _ := s.podsOf("app=myapp,version=v1")
		if len(names) == 0 {
			s.Fatalf("scenario %q, mode %s: no myapp pod", s.name, s.c.mode)
		}
		for _, url := range []string{"http://api-service.prod.svc.cluster.local:8080", "http://api-service.prod:8080", "http://prod-api-alias:8080"} {
			s.eventually(20*time.Second, url+" answers", func() ([]string, string, bool) {
				out, err := s.c.inPod("default", names[0], "curl", "-sS", "-m", "3", url)
				ok := err == nil && strings.HasPrefix(out, "external host 192.0.2.10")
				if !ok && strings.Contains(out, "Resolving timed out") {
					// Where the questions go unanswered: through the
					// pod's search list, and straight to each DNS pod
					// and to the DNS Service (a rare userspace-mode
					// failure, kept for its diagnosis).
					out += "\n" + dnsDiagnosis(s, names[0], "api-service.prod.svc.cluster.local")
				}
				return []string{"kubectl exec " + names[0] + " -- curl " + url}, out, ok
			})
		}
	})
}

// dnsDiagnosis asks for name from pod in several ways, one try each, and
// returns what each said.
func dnsDiagnosis(s *scenario, pod, name string) string {
	var b strings.Builder
	ask := func(args ...string) {
		out, err := s.c.inPod("default", pod, append([]string{"dig", "+time=1", "+tries=1"}, args...)...)
		fmt.Fprintf(&b, "--- dig %s: %v\n%s\n", strings.Join(args, " "), err, out)
	}
	ask("+search", "+short", name, "A")
	ask("+search", "+short", name, "AAAA")
	ask("+short", "@10.96.0.10", name+".default.svc.cluster.local", "A")
	out, _ := s.c.kubectl("get", "pods", "-n", "kube-system", "-l", "k8s-app=kube-dns", "-o", "jsonpath={.items[*].status.podIP}")
	for _, ip := range strings.Fields(out) {
		ask("+short", "@"+ip, name, "A")
	}
	return b.String()
}

// 12: seed 002 traffic policies.
func seed002(s *scenario) {
	s.part("notReadyAddresses-publishNotReadyAddresses", func(s *scenario) {
		s.apply("unready.yaml")
		var ip string
		s.eventually(60*time.Second, "unready pod Running with podIP", func() ([]string, string, bool) {
			out, _ := s.c.kubectl("get", "pod", "unready", "-o", "wide")
			ip = s.kubectl("get", "pod", "unready", "-o", "jsonpath={.status.podIP}")
			return []string{"kubectl get pod unready -o wide"}, out, ip != "" && regexp.MustCompile(`(?m)^unready\s+0/1\s+Running`).MatchString(out)
		})
		s.eventually(20*time.Second, "unready pod in notReadyAddresses", func() ([]string, string, bool) {
			args := []string{"get", "endpoints", "unready", "-o", "jsonpath={.subsets[*].notReadyAddresses[*].ip}|{.subsets[*].addresses[*].ip}"}
			out, _ := s.c.kubectl(args...)
			return append([]string{"kubectl"}, args...), out, out == ip+"|"
		})
		s.eventually(20*time.Second, "publishNotReadyAddresses puts it in DNS", func() ([]string, string, bool) {
			args := []string{"dig", "+short", "+time=2", "+tries=1", "@10.96.0.10", "unready-published.default.svc.cluster.local"}
			out, _ := s.c.onNode(1, args...)
			return args, out, strings.TrimSpace(out) == ip
		})
		args := []string{"dig", "+short", "+time=2", "+tries=1", "@10.96.0.10", "unready.default.svc.cluster.local"}
		out, _ := s.c.onNode(1, args...)
		cip := s.kubectl("get", "svc", "unready", "-o", "jsonpath={.spec.clusterIP}")
		if strings.TrimSpace(out) != cip {
			s.errorf(args, out, "a ClusterIP Service's name resolves to its ClusterIP %s", cip)
		}
	})
	s.part("externalTrafficPolicy-Local-healthCheckNodePort", func(s *scenario) {
		s.apply("etp-local-svc.yaml")
		hc := s.kubectl("get", "svc", "etp-local", "-o", "jsonpath={.spec.healthCheckNodePort}")
		if n, err := strconv.Atoi(hc); err != nil || n < 30000 || n > 32767 {
			s.errorf([]string{"kubectl get svc etp-local -o jsonpath={.spec.healthCheckNodePort}"}, hc, "want an allocated healthCheckNodePort")
			return
		}
		names, _ := s.podsOf("app=myapp,version=v1")
		local := map[int]bool{}
		for _, p := range names {
			local[s.nodeOfPod("default", p)] = true
		}
		for i := 1; i <= nodes; i++ {
			want := "503"
			if local[i] {
				want = "200"
			}
			url := "http://" + nodeIP(i) + ":" + hc + "/healthz"
			s.eventually(20*time.Second, "health check "+url+" = "+want, func() ([]string, string, bool) {
				out, _ := s.c.onLab("curl", "-sS", "-m", "3", "-o", "/dev/null", "-w", "%{http_code}", url)
				return []string{"curl " + url}, out, out == want
			})
		}
		np := s.kubectl("get", "svc", "etp-local", "-o", "jsonpath={.spec.ports[0].nodePort}")
		for i := 1; i <= nodes; i++ {
			out, err := s.c.onLab("curl", "-sS", "-m", "2", nodeIP(i)+":"+np)
			if local[i] && (err != nil || !strings.HasPrefix(out, "Hello Kubernetes bootcamp!")) {
				s.errorf([]string{"curl " + nodeIP(i) + ":" + np}, out, "node %d has local endpoints and must answer", i)
			}
			if !local[i] && err == nil {
				s.errorf([]string{"curl " + nodeIP(i) + ":" + np}, out, "node %d has no local endpoint; with externalTrafficPolicy Local it must not answer", i)
			}
		}
	})
	s.part("internalTrafficPolicy-Local", func(s *scenario) {
		s.apply("itp-local-svc.yaml")
		ip := s.kubectl("get", "svc", "itp-local", "-o", "jsonpath={.spec.clusterIP}")
		names, _ := s.podsOf("app=myapp,version=v1")
		byNode := map[int][]string{}
		for _, p := range names {
			n := s.nodeOfPod("default", p)
			byNode[n] = append(byNode[n], p)
		}
		for i := 1; i <= nodes; i++ {
			if len(byNode[i]) == 0 {
				s.eventually(20*time.Second, "no local endpoint: no answer", func() ([]string, string, bool) {
					out, err := s.c.onNode(i, "curl", "-sS", "-m", "2", ip+":38080")
					return []string{"curl " + ip + ":38080"}, out, err != nil
				})
				continue
			}
			// The new Service reaches the node's rules within a sync or two.
			s.eventually(20*time.Second, "local endpoints answer", func() ([]string, string, bool) {
				out, err := s.c.onNode(i, "curl", "-sS", "-m", "2", ip+":38080")
				return []string{"curl " + ip + ":38080"}, out, err == nil
			})
			for k := 0; k < 10; k++ {
				out, err := s.c.onNode(i, "curl", "-sS", "-m", "3", ip+":38080")
				if err != nil {
					s.failf([]string{"curl " + ip + ":38080"}, out, err, "node %d has local endpoints", i)
				}
				ok := false
				for _, p := range byNode[i] {
					ok = ok || strings.Contains(out, "Running on: "+p+" ")
				}
				if !ok {
					s.errorf([]string{"curl " + ip + ":38080 (node " + strconv.Itoa(i) + ")"}, out, "answered by a pod not on node %d (local: %v)", i, byNode[i])
					break
				}
			}
		}
	})
	s.part("nodeport-addresses", func(s *scenario) {
		// The clusters run with --nodeport-addresses 172.18.0.0/24: a
		// NodePort answers on the node-network address, and not on the
		// node's other local addresses (its pod bridge gateway).
		s.apply("np-addresses-svc.yaml")
		np := s.kubectl("get", "svc", "np-addresses", "-o", "jsonpath={.spec.ports[0].nodePort}")
		s.eventually(20*time.Second, "NodePort answers on the node address", func() ([]string, string, bool) {
			out, err := s.c.onNode(1, "curl", "-sS", "-m", "2", nodeIP(1)+":"+np)
			return []string{"curl " + nodeIP(1) + ":" + np}, out, err == nil && strings.Contains(out, "Hello Kubernetes bootcamp!")
		})
		addrs := s.onNode(1, "ip", "-4", "-o", "addr", "show", "dev", "cni0")
		m := regexp.MustCompile(`inet (\d+\.\d+\.\d+\.\d+)/`).FindStringSubmatch(addrs)
		if m == nil {
			s.failf([]string{"ip -4 -o addr show dev cni0"}, addrs, nil, "node 1 has no pod bridge address")
		}
		out, err := s.c.onNode(1, "curl", "-sS", "-m", "2", m[1]+":"+np)
		if err == nil {
			s.errorf([]string{"curl " + m[1] + ":" + np}, out, "the NodePort answered on %s, outside --nodeport-addresses 172.18.0.0/24", m[1])
		}
	})
	s.part("client-address-kept", func(s *scenario) {
		// A client outside the cluster (the machine hosting it, 172.18.0.1)
		// calls the NodePort of the node running the pod: with
		// externalTrafficPolicy Local the pod sees the client's address,
		// with Cluster it sees an address of the node (masqueraded).
		if s.c.mode == "userspace" {
			// A userspace proxy opens its own connection to the endpoint, so
			// the pod always sees the node (as with kube-proxy's userspace
			// mode); docs/proxy-modes.md lists this limit.
			s.Skip("userspace mode cannot preserve the client address: the proxy's own connection reaches the pod")
		}
		s.apply("clientip.yaml")
		s.eventually(60*time.Second, "clientip pod Ready", func() ([]string, string, bool) {
			out, _ := s.c.kubectl("get", "pod", "clientip")
			return []string{"kubectl get pod clientip"}, out, regexp.MustCompile(`(?m)^clientip\s+1/1\s+Running`).MatchString(out)
		})
		n := s.nodeOfPod("default", "clientip")
		for _, tc := range []struct {
			svc       string
			wantLocal bool
		}{{"clientip-local", true}, {"clientip-cluster", false}} {
			np := s.kubectl("get", "svc", tc.svc, "-o", "jsonpath={.spec.ports[0].nodePort}")
			url := nodeIP(n) + ":" + np
			out := s.eventually(20*time.Second, tc.svc+" answers", func() ([]string, string, bool) {
				out, err := s.c.onLab("curl", "-sS", "-m", "2", url)
				return []string{"curl " + url}, out, err == nil && strings.TrimSpace(out) != ""
			})
			seen := strings.TrimSpace(out)
			if tc.wantLocal && seen != "172.18.0.1" {
				s.errorf([]string{"curl " + url}, out, "externalTrafficPolicy Local: the pod saw %s, want the client's 172.18.0.1", seen)
			}
			if !tc.wantLocal && seen == "172.18.0.1" {
				s.errorf([]string{"curl " + url}, out, "externalTrafficPolicy Cluster: the pod saw the client's own address; want it masqueraded")
			}
		}
	})
}
