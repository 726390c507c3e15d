package seeds

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// 20 (seed 000 "kubectl get daemonset kube-proxy -n kube-system", seed 001
// "kubectl logs -n kube-system POD_NAME | grep Using", seed 002 "kubectl
// edit cm kube-proxy -n kube-system": mode and strictARP): the
// proxies' configuration is kube-system/kube-proxy's config.conf, as in a
// kubeadm cluster, and editing it moves every node's proxy to the new mode
// (the old mode's rules removed), Services answering before and after.
func kubeProxyConfig(s *scenario) {
	conf := s.kubectl("get", "cm", "kube-proxy", "-n", "kube-system", "-o", `jsonpath={.data.config\.conf}`)
	if !strings.Contains(conf, "kind: KubeProxyConfiguration") || !strings.Contains(conf, "mode: "+s.c.mode+"\n") {
		s.errorf([]string{"kubectl get cm kube-proxy -n kube-system"}, conf, "config.conf is not a KubeProxyConfiguration with mode %s", s.c.mode)
		return
	}
	// The proxies as kubeadm's DaemonSet shows them (seed 000).
	s.eventually(60*time.Second, "the kube-proxy DaemonSet counts 3 ready proxies", func() ([]string, string, bool) {
		out, _ := s.c.kubectl("get", "daemonset", "kube-proxy", "-n", "kube-system")
		lines := strings.Split(strings.TrimSpace(out), "\n")
		ok := len(lines) == 2 && strings.Join(strings.Fields(lines[0]), " ") == "NAME DESIRED CURRENT READY UP-TO-DATE AVAILABLE NODE SELECTOR AGE" &&
			strings.HasPrefix(strings.Join(strings.Fields(lines[1]), " "), "kube-proxy 3 3 3 3 3 kubernetes.io/os=linux ")
		return []string{"kubectl get daemonset kube-proxy -n kube-system"}, out, ok
	})
	// The proxies' pods and their logs (seed 001: "kubectl get pods -n
	// kube-system | grep kube-proxy", then "kubectl logs -n kube-system
	// POD_NAME | grep Using"): each node agent runs its proxy as a static
	// pod, kube-proxy-NODE.
	var proxyPods []string
	s.eventually(60*time.Second, "a Running kube-proxy pod per node", func() ([]string, string, bool) {
		out, _ := s.c.kubectl("get", "pods", "-n", "kube-system", "-o", "wide")
		proxyPods = nil
		for _, l := range strings.Split(out, "\n") {
			if f := strings.Fields(l); len(f) >= 3 && strings.Contains(f[0], "kube-proxy") && f[1] == "1/1" && f[2] == "Running" {
				proxyPods = append(proxyPods, f[0])
			}
		}
		return []string{"kubectl get pods -n kube-system -o wide | grep kube-proxy"}, out, len(proxyPods) == 3
	})
	// usingMode: every proxy's last "Using" line names mode m.
	usingMode := func(m string) {
		for _, pod := range proxyPods {
			s.eventually(60*time.Second, pod+" logs that it uses "+m, func() ([]string, string, bool) {
				out, _ := s.c.kubectl("logs", "-n", "kube-system", pod)
				var last string
				for _, l := range strings.Split(out, "\n") {
					if strings.Contains(l, "Using") {
						last = l
					}
				}
				return []string{"kubectl logs -n kube-system " + pod + ` | grep "Using"`}, out, strings.Contains(last, `"Using `+m+` Proxier"`)
			})
		}
	}
	usingMode(s.c.mode)
	if out := s.kubectl("logs", "-n", "kube-system", "ds/kube-proxy"); !strings.Contains(out, `"Using `+s.c.mode+` Proxier"`) {
		s.errorf([]string{"kubectl logs -n kube-system ds/kube-proxy"}, out, "no Using line")
	}
	// A user's DaemonSet: a pod on each node it tolerates (not the
	// control-plane node, whose NoSchedule taint it does not), running.
	s.applyYAML("ds.yaml", `apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec:
      containers: [{name: agent, image: "jocatalin/kubernetes-bootcamp:v1"}]
`)
	s.eventually(90*time.Second, "the DaemonSet runs a ready pod on each worker", func() ([]string, string, bool) {
		out, _ := s.c.kubectl("get", "daemonset", "agent", "--no-headers")
		pods, _ := s.c.kubectl("get", "pods", "-l", "app=agent", "-o", "jsonpath={range .items[*]}{.spec.nodeName} {.status.phase}{\"\\n\"}{end}")
		return []string{"kubectl get daemonset agent", "kubectl get pods -l app=agent"}, out + pods,
			strings.HasPrefix(strings.Join(strings.Fields(out), " "), "agent 2 2 2 2 2 <none> ") &&
				strings.Contains(pods, s.c.nodeName(2)+" Running") && strings.Contains(pods, s.c.nodeName(3)+" Running")
	})
	s.kubectl("delete", "daemonset", "agent")
	to := map[string]string{"iptables": "nftables", "nftables": "iptables"}[s.c.mode]
	if to == "" {
		return
	}
	s.applyYAML("kpcfg.yaml", `apiVersion: apps/v1
kind: Deployment
metadata: {name: kpcfg}
spec:
  replicas: 1
  selector: {matchLabels: {app: kpcfg}}
  template:
    metadata: {labels: {app: kpcfg}}
    spec:
      containers: [{name: app, image: "jocatalin/kubernetes-bootcamp:v1", ports: [{containerPort: 8080}]}]
---
apiVersion: v1
kind: Service
metadata: {name: kpcfg}
spec:
  selector: {app: kpcfg}
  ports: [{port: 80, targetPort: 8080}]
`)
	s.waitPods("app=kpcfg", 1)
	ip := s.kubectl("get", "svc", "kpcfg", "-o", "jsonpath={.spec.clusterIP}")
	answers := func() {
		s.eventually(60*time.Second, "the Service answers from node 2", func() ([]string, string, bool) {
			out, err := s.c.onNode(2, "curl", "-sS", "-m", "2", "http://"+ip+"/")
			return []string{"curl http://" + ip + "/"}, out, err == nil && strings.Contains(out, "kpcfg")
		})
	}
	answers()
	// Every node's rules in mode m, none of the other mode's.
	inMode := func(m string) {
		for n := 1; n <= 3; n++ {
			s.eventually(90*time.Second, fmt.Sprintf("node %d's proxy programs mode %s", n, m), func() ([]string, string, bool) {
				nft, nftErr := s.c.onNode(n, "nft", "list", "table", "ip", "kube-proxy")
				ipt, _ := s.c.onNode(n, "iptables-save", "-t", "nat")
				hasNFT, hasIPT := nftErr == nil && strings.Contains(nft, "default/kpcfg"), strings.Contains(ipt, ":KUBE-SERVICES")
				out := "nft list table ip kube-proxy:\n" + nft + "\niptables-save -t nat:\n" + ipt
				return []string{"nft list table ip kube-proxy", "iptables-save -t nat"}, out,
					(m == "nftables" && hasNFT && !hasIPT) || (m == "iptables" && hasIPT && !hasNFT && nftErr != nil)
			})
		}
	}
	set := func(c string) {
		patch, _ := json.Marshal(map[string]any{"data": map[string]string{"config.conf": c}})
		s.kubectl("patch", "cm", "kube-proxy", "-n", "kube-system", "--type=merge", "-p", string(patch))
	}
	set(strings.Replace(conf, "mode: "+s.c.mode+"\n", "mode: "+to+"\n", 1))
	inMode(to)
	usingMode(to)
	answers()
	set(conf)
	inMode(s.c.mode)
	usingMode(s.c.mode)
	answers()
	s.kubectl("delete", "deployment/kpcfg", "service/kpcfg")
}

// 21: a host-network pod (the kind the proxies are now): it runs in its
// node's network namespace, its pod IP is the node's, it answers on the
// node's address, and a Service selecting it leads to node:port.
func hostNetworkPod(s *scenario) {
	worker := s.c.nodeName(2)
	s.applyYAML("hostnet.yaml", `apiVersion: v1
kind: Pod
metadata: {name: hostnet, labels: {app: hostnet}}
spec:
  hostNetwork: true
  nodeSelector: {kubernetes.io/hostname: `+worker+`}
  containers:
  - name: web
    image: jocatalin/kubernetes-bootcamp:v1
    ports: [{containerPort: 8080}]
    readinessProbe: {httpGet: {path: /, port: 8080}, periodSeconds: 1}
---
apiVersion: v1
kind: Service
metadata: {name: hostnet}
spec:
  selector: {app: hostnet}
  ports: [{port: 80, targetPort: 8080}]
`)
	_, ips := s.waitPods("app=hostnet", 1)
	if len(ips) != 1 || ips[0] != nodeIP(2) {
		s.errorf([]string{"kubectl get pods -l app=hostnet -o wide"}, fmt.Sprint(ips), "the pod's IP is not its node's address %s", nodeIP(2))
	}
	s.eventually(60*time.Second, "the node's address answers from node 3", func() ([]string, string, bool) {
		out, err := s.c.onNode(3, "curl", "-sS", "-m", "2", "http://"+nodeIP(2)+":8080/")
		return []string{"curl http://" + nodeIP(2) + ":8080/"}, out, err == nil && strings.Contains(out, "Running on: "+worker+" |")
	})
	ip := s.kubectl("get", "svc", "hostnet", "-o", "jsonpath={.spec.clusterIP}")
	s.eventually(60*time.Second, "the Service leads to the node's port", func() ([]string, string, bool) {
		out, err := s.c.onNode(1, "curl", "-sS", "-m", "2", "http://"+ip+"/")
		return []string{"curl http://" + ip + "/"}, out, err == nil && strings.Contains(out, "Running on: "+worker+" |")
	})
	s.kubectl("delete", "pod/hostnet", "service/hostnet", "--wait=true")
	s.eventually(30*time.Second, "the node's port is closed after the pod is gone", func() ([]string, string, bool) {
		out, err := s.c.onNode(3, "curl", "-sS", "-m", "2", "http://"+nodeIP(2)+":8080/")
		return []string{"curl http://" + nodeIP(2) + ":8080/"}, out, err != nil
	})
}
