package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

// Pinned peer versions.
const (
	kubeProxyVersion = "v1.37.2" // go.mod pins k8s.io/kubernetes v1.37.2
	corednsVersion   = "v1.15.0"
)

// peers are the binaries under test.
type peers struct {
	svcnet    string
	kubeProxy string
	// kubeAPIServer is built only for the API comparison (-only api).
	kubeAPIServer string
	coredns       string
	haproxy       string // on PATH (Debian package)
	// svcnetProxy is a copy of svcnet that only the proxy under test runs:
	// kube-proxy shares no file pages with the harness's svcnet apiserver,
	// and neither does a deployed svcnet proxy, so the RSS of the two proxies
	// is compared without pages counted twice for the apiserver (the svcnet
	// binary carries every component, and the proxy pages out those it does
	// not use only where no other process maps them).
	svcnetProxy string

	versions map[string]string
}

func goBin() string { return filepath.Join(runtime.GOROOT(), "bin", "go") }

// buildPeers builds svcnet (the repository at root, its own go.mod),
// kube-proxy (k8s.io/kubernetes from this module's go.mod) and CoreDNS
// (`go install github.com/coredns/coredns@v1.15.0`, as bench/dns documents)
// into dir, unless a binary already there was built from the same inputs
// in this run (the Go build cache makes a rebuild cheap anyway).
func buildPeers(root, dir string, needDNS, needAPI bool) (*peers, error) {
	p := &peers{svcnet: filepath.Join(dir, "svcnet"), kubeProxy: filepath.Join(dir, "kube-proxy"),
		coredns: filepath.Join(dir, "coredns"), kubeAPIServer: filepath.Join(dir, "kube-apiserver"), versions: map[string]string{}}
	type build struct {
		name string
		dir  string
		env  []string
		args []string
	}
	builds := []build{
		{"svcnet", root, nil, []string{"build", "-o", p.svcnet, "./cmd/svcnet"}},
		{"kube-proxy", filepath.Join(root, "bench", "run"), nil, []string{"build", "-o", p.kubeProxy,
			"-ldflags", "-X k8s.io/component-base/version.gitVersion=" + kubeProxyVersion, "k8s.io/kubernetes/cmd/kube-proxy"}},
	}
	if needAPI {
		builds = append(builds, build{"kube-apiserver", filepath.Join(root, "bench", "run"), nil, []string{"build", "-o", p.kubeAPIServer,
			"-ldflags", "-X k8s.io/component-base/version.gitVersion=" + kubeProxyVersion, "k8s.io/kubernetes/cmd/kube-apiserver"}})
	}
	if needDNS {
		builds = append(builds, build{"coredns", dir, []string{"GOBIN=" + dir},
			[]string{"install", "github.com/coredns/coredns@" + corednsVersion}})
	}
	for _, b := range builds {
		t := time.Now()
		cmd := exec.Command(goBin(), b.args...)
		cmd.Dir = b.dir
		cmd.Env = append(os.Environ(), b.env...)
		if out, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("go %s: %v\n%s", strings.Join(b.args, " "), err, out)
		}
		logf("built %s in %s", b.name, time.Since(t).Round(time.Second))
	}
	p.svcnetProxy = filepath.Join(dir, "svcnet-proxy")
	if err := copyFile(p.svcnet, p.svcnetProxy); err != nil {
		return nil, err
	}
	p.versions["svcnet"] = firstLine(output(p.svcnet, "version"))
	p.versions["kube-proxy"] = firstLine(output(p.kubeProxy, "--version"))
	if needAPI {
		p.versions["kube-apiserver"] = firstLine(output(p.kubeAPIServer, "--version"))
	}
	if needDNS {
		p.versions["coredns"] = firstLine(output(p.coredns, "-version"))
	}
	if h, err := exec.LookPath("haproxy"); err == nil {
		p.haproxy = h
		p.versions["haproxy"] = firstLine(output(h, "-v"))
	}
	// The Debian packages' own versions.
	for _, pkg := range []string{"haproxy", "nftables", "iptables", "dnsperf", "iperf3", "wrk", "linux-image-amd64"} {
		if v, err := exec.Command("dpkg-query", "-W", "-f", "${Version}", pkg).Output(); err == nil && len(v) > 0 {
			p.versions["debian "+pkg] = string(v)
		}
	}
	p.versions["kernel"] = output("uname", "-r")
	p.versions["go"] = runtime.Version()
	return p, nil
}

func output(bin string, args ...string) string {
	b, _ := exec.Command(bin, args...).CombinedOutput()
	return strings.TrimSpace(string(b))
}

// copyFile copies an executable.
func copyFile(from, to string) error {
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	_ = os.Remove(to)
	return os.WriteFile(to, b, 0o755)
}
