package sandbox

import (
	"context"
	"fmt"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/svcnet/svcnet/internal/testbed"
	"github.com/svcnet/svcnet/node/images"
)

// TestMain lets the test binary play the infra process and the built-in
// image servers, as the svcnet binary does in production.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "sandbox-init":
			if err := InitMain(os.Args[2:]); err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(1)
			}
			os.Exit(0)
		case "builtin-bootcamp":
			_ = images.ServeBootcamp(context.Background(), ":8080", "1", os.Stdout)
			os.Exit(0)
		case "spawn-init":
			// An infra process started without a mount namespace of its own
			// (TestInitRefusesSharedMountNamespace).
			cmd := exec.Command(os.Args[0], append([]string{"sandbox-init"}, os.Args[2:]...)...)
			cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
			cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
			if err := cmd.Run(); err != nil {
				os.Exit(1)
			}
			os.Exit(0)
		}
	}
	os.Exit(m.Run())
}

// inNS runs f on a thread inside n (testbed's Do, which switches back).
func inNS(n *testbed.NetNS, f func() error) error { return n.Do(f) }

func TestLogLines(t *testing.T) {
	in := []byte("2026-01-01T00:00:00.1Z stdout F hello\n2026-01-01T00:00:01Z stderr P par\n2026-01-01T00:00:02Z stderr F tial\n")
	if got := string(LogLines(in, false)); got != "hello\npartial\n" {
		t.Errorf("got %q", got)
	}
	if got := string(LogLines(in, true)); !strings.HasPrefix(got, "2026-01-01T00:00:00.1Z hello\n") {
		t.Errorf("timestamps: %q", got)
	}
}

// A node namespace with the bridge, two pods in it, traffic between them
// and from the node, the pod's own files and hostname, logs, and a clean
// teardown.
func TestSandboxInNodeNamespace(t *testing.T) {
	testbed.RequireCommand(t, "ip", "nsenter", "curl")
	node := testbed.NewNetNS(t, "sbnode")
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	prefix := "svcnt-p" + fmt.Sprint(os.Getpid()%100000) + "-"
	ipam, err := NewIPAM(netip.MustParsePrefix("10.244.1.0/24"), filepath.Join(dir, "ipam.json"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{DataDir: dir, Bridge: "cni0", NSPrefix: prefix, Exe: exe, InitArgs: []string{"sandbox-init"}, IPAM: ipam}
	ctx := context.Background()
	var sbs []*Sandbox
	err = inNS(node, func() error {
		if err := EnsureBridge(ctx, "cni0", netip.MustParsePrefix("10.244.1.1/24")); err != nil {
			return err
		}
		for _, name := range []string{"web-a", "web-b"} {
			sb, err := Create(ctx, cfg, Spec{Namespace: "default", Name: name, UID: "uid-" + name + "-0123456789", Hostname: name,
				ResolvConf: []byte("search default.svc.cluster.local svc.cluster.local cluster.local\nnameserver 10.96.0.10\noptions ndots:5\n"),
				Hosts:      []byte("127.0.0.1\tlocalhost\n"), NginxFiles: map[string][]byte{"index.html": []byte(name + "\n")}})
			if err != nil {
				return err
			}
			sbs = append(sbs, sb)
		}
		return nil
	})
	t.Cleanup(func() {
		_ = inNS(node, func() error {
			for _, sb := range sbs {
				_ = sb.Destroy(context.Background(), cfg)
			}
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	a, b := sbs[0], sbs[1]
	if a.IP.String() != "10.244.1.2" || b.IP.String() != "10.244.1.3" {
		t.Errorf("IPs %s %s", a.IP, b.IP)
	}
	runIn := func(sb *Sandbox, argv ...string) string {
		t.Helper()
		out, err := sb.Command(argv, []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}, "").CombinedOutput()
		if err != nil {
			t.Fatalf("%v in %s: %v: %s", argv, sb.Name, err, out)
		}
		return string(out)
	}
	if got := runIn(a, "hostname"); got != "web-a\n" {
		t.Errorf("hostname %q", got)
	}
	if got := runIn(a, "cat", "/etc/resolv.conf"); !strings.Contains(got, "nameserver 10.96.0.10") {
		t.Errorf("resolv.conf %q", got)
	}
	if got := runIn(b, "cat", NginxRoot+"/index.html"); got != "web-b\n" {
		t.Errorf("private nginx root %q", got)
	}
	runIn(a, "sh", "-c", "echo web1 > "+NginxRoot+"/index.html")
	if got := runIn(b, "cat", NginxRoot+"/index.html"); got != "web-b\n" {
		t.Errorf("pod b sees pod a's write: %q", got)
	}
	if got := runIn(a, "ip", "-4", "-o", "addr", "show", "eth0"); !strings.Contains(got, "10.244.1.2/24") {
		t.Errorf("eth0 %q", got)
	}
	// Hairpin mode on the pods' bridge ports (a pod reaching itself through
	// a Service; e2e/seeds checks the traffic).
	for _, sb := range sbs {
		if out, _ := node.Run("ip", "-d", "link", "show", sb.HostIf); !strings.Contains(out, "hairpin on") {
			t.Errorf("bridge port %s of %s: want hairpin on:\n%s", sb.HostIf, sb.Name, out)
		}
	}
	// Node's own resolv.conf is untouched.
	if b, _ := os.ReadFile("/etc/resolv.conf"); strings.Contains(string(b), "10.96.0.10") {
		t.Error("the node's /etc/resolv.conf was changed")
	}
	// A container: the built-in server in pod a, reached from pod b and the node.
	p, err := a.Start([]string{exe, "builtin-bootcamp"}, []string{"HOSTNAME=web-a"}, "", LogPath(a.Dir, "app", 0))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop(time.Second)
	var got string
	for i := 0; i < 50; i++ {
		got, _ = node.Run("curl", "-s", "--max-time", "1", "http://10.244.1.2:8080/")
		if got != "" {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if got != "Hello Kubernetes bootcamp! | Running on: web-a | v=1\n" {
		t.Errorf("from node: %q", got)
	}
	if got := runIn(b, "curl", "-s", "--max-time", "2", "http://10.244.1.2:8080/"); !strings.Contains(got, "web-a") {
		t.Errorf("pod to pod: %q", got)
	}
	// SIGTERM ends the server; exit code and log are kept.
	p.Stop(5 * time.Second)
	code, sig, _ := p.Exit()
	if code != 0 && sig != 15 {
		t.Errorf("exit code %d signal %d", code, sig)
	}
	logb, _ := os.ReadFile(LogPath(a.Dir, "app", 0))
	if !strings.Contains(string(LogLines(logb, false)), "Kubernetes Bootcamp App Started At:") {
		t.Errorf("log %q", logb)
	}
	// A process ignoring SIGTERM is killed after the grace period.
	q, err := a.Start([]string{"sh", "-c", "trap '' TERM; echo started; while :; do sleep 0.1; done"}, []string{"PATH=/usr/bin:/bin"}, "", LogPath(a.Dir, "stubborn", 0))
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	start := time.Now()
	q.Stop(300 * time.Millisecond)
	if code, sig, _ := q.Exit(); sig != 9 || code != 137 {
		t.Errorf("stubborn exit %d signal %d", code, sig)
	}
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Errorf("killed before grace: %v", d)
	}
	_ = http.StatusOK
	// Teardown leaves nothing.
	if err := inNS(node, func() error { return a.Destroy(ctx, cfg) }); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat("/var/run/netns/" + a.NetNS); !os.IsNotExist(err) {
		t.Errorf("netns %s left behind", a.NetNS)
	}
	if out, _ := node.Run("ip", "link", "show", a.HostIf); strings.Contains(out, a.HostIf+"@") {
		t.Errorf("veth left: %s", out)
	}
	if owners := ipam.Owners(); len(owners) != 1 {
		t.Errorf("IPAM owners after destroy: %v", owners)
	}
}

// ReadExit reads what the shim recorded of an instance that ended: its
// exit status and end, and its start from the shim record; an instance
// without an exit record is an error.
func TestReadExit(t *testing.T) {
	log := LogPath(t.TempDir(), "init", 2)
	if _, err := ReadExit(log); err == nil {
		t.Fatal("no record: no error")
	}
	started := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	if err := os.MkdirAll(filepath.Dir(log), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(log+".shim", []byte(`{"shimPID":1,"pid":2,"startedAt":"2026-01-02T03:04:05Z"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(log+".exit", []byte(`{"exitCode":3,"signal":0,"finishedAt":"2026-01-02T03:04:07Z"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := ReadExit(log)
	if err != nil || r.ExitCode != 3 || !r.StartedAt.Equal(started) || !r.FinishedAt.Equal(started.Add(2*time.Second)) {
		t.Errorf("got %+v %v", r, err)
	}
}
