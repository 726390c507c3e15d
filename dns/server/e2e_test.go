package server

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/svcnet/svcnet/internal/testbed"
)

// These tests drive the server with the real dig and nslookup (Debian
// dnsutils) on 127.0.0.1, the way the seeds query kube-dns.

func dig(t *testing.T, addr string, args ...string) string {
	t.Helper()
	testbed.RequireCommand(t, "dig")
	host, port, _ := net.SplitHostPort(addr)
	full := append([]string{"@" + host, "-p", port, "+time=2", "+tries=1"}, args...)
	out, err := exec.Command("dig", full...).CombinedOutput()
	if err != nil {
		t.Fatalf("dig %v: %v\n%s", full, err, out)
	}
	return string(out)
}

func TestDigSeedAnswers(t *testing.T) {
	ts := startServer(t)
	for _, c := range []struct {
		args []string
		want []string // regexps that must all match
	}{
		{[]string{"myapp.default.svc.cluster.local", "A"}, []string{
			`status: NOERROR`, `flags: qr aa rd;`, `myapp\.default\.svc\.cluster\.local\.\s+5\s+IN\s+A\s+10\.96\.3\.215`}},
		{[]string{"http.tcp.myapp.default.svc.cluster.local", "SRV"}, []string{
			`http\.tcp\.myapp\.default\.svc\.cluster\.local\.\s+5\s+IN\s+SRV\s+0 100 38080 myapp\.default\.svc\.cluster\.local\.`,
			`ADDITIONAL SECTION:\nmyapp\.default\.svc\.cluster\.local\.\s+5\s+IN\s+A\s+10\.96\.3\.215`}},
		{[]string{"svc-external-name.default.svc.cluster.local", "A"}, []string{
			`svc-external-name\.default\.svc\.cluster\.local\.\s+5\s+IN\s+CNAME\s+www\.example\.com\.`,
			`www\.example\.com\.\s+\d+\s+IN\s+A\s+93\.184\.215\.14`}},
		{[]string{"myapp.svc.cluster.local", "A"}, []string{
			`status: NXDOMAIN`,
			`AUTHORITY SECTION:\ncluster\.local\.\s+5\s+IN\s+SOA\s+ns\.dns\.cluster\.local\. hostmaster\.cluster\.local\. \d+ 7200 1800 86400 5`}},
		{[]string{"myapp.default.svc.cluster.local", "AAAA"}, []string{`status: NOERROR`, `ANSWER: 0, AUTHORITY: 1`}},
		{[]string{"-x", "10.96.3.215"}, []string{`215\.3\.96\.10\.in-addr\.arpa\.\s+5\s+IN\s+PTR\s+myapp\.default\.svc\.cluster\.local\.`}},
		{[]string{"dns-version.cluster.local", "TXT"}, []string{`"1\.1\.0"`}},
		{[]string{"cluster.local", "AXFR"}, []string{`Transfer failed`}},
		{[]string{"+tcp", "web.default.svc.cluster.local", "A"}, []string{`IN\s+A\s+10\.244\.1\.10`, `IN\s+A\s+10\.244\.2\.11`}},
		{[]string{"+notcp", "+noedns", "+ignore", "big.default.svc.cluster.local", "A"}, []string{`flags: qr aa tc rd;`}},
		{[]string{"big.default.svc.cluster.local", "A"}, []string{`ANSWER: 60,`}}, // dig retries over TCP by itself
	} {
		out := dig(t, ts.addr, c.args...)
		for _, w := range c.want {
			if !regexp.MustCompile(w).MatchString(out) {
				t.Errorf("dig %v: output lacks /%s/:\n%s", c.args, w, out)
			}
		}
	}
}

// TestNslookupSearchPath reproduces the seed's `nslookup -debug -type=a
// myapp` walk over "search default.svc.cluster.local svc.cluster.local
// cluster.local" with ndots:5. nslookup reads /etc/resolv.conf, so it runs
// in a private mount namespace (unshare -m) where a test-written resolv.conf
// is bind-mounted over /etc/resolv.conf; the host's file is never touched.
func TestNslookupSearchPath(t *testing.T) {
	testbed.RequireRoot(t)
	testbed.RequireCommand(t, "nslookup", "unshare", "mount")
	ts := startServer(t)
	host, port, _ := net.SplitHostPort(ts.addr)
	rc := filepath.Join(t.TempDir(), "resolv.conf")
	if err := os.WriteFile(rc, []byte("nameserver "+host+"\nsearch default.svc.cluster.local svc.cluster.local cluster.local\noptions ndots:5\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(args string) string {
		script := "mount --bind " + rc + " /etc/resolv.conf && exec " + args
		out, _ := exec.Command("unshare", "-m", "--propagation", "private", "sh", "-c", script).CombinedOutput()
		return string(out)
	}
	out := run("nslookup -debug -port=" + port + " -type=a myapp")
	t.Logf("nslookup -debug -type=a myapp:\n%s", out)
	for _, w := range []string{
		`Name:\s+myapp\.default\.svc\.cluster\.local\nAddress: 10\.96\.3\.215`,
	} {
		if !regexp.MustCompile(w).MatchString(out) {
			t.Errorf("nslookup myapp: lacks /%s/:\n%s", w, out)
		}
	}
	// The seed's nslookup (busybox-style) asks all three expansions at once;
	// Debian's stops at the first hit. Ask the other two directly: both must
	// be NXDOMAIN, as in the seed.
	for _, name := range []string{"myapp.svc.cluster.local.", "myapp.cluster.local."} {
		out := run("nslookup -port=" + port + " -type=a " + name)
		if want := "server can't find " + strings.TrimSuffix(name, ".") + ": NXDOMAIN"; !strings.Contains(out, want) {
			t.Errorf("nslookup %s: want %q in:\n%s", name, want, out)
		}
	}
	// myapp.default needs the second search domain: the first expansion
	// (myapp.default.default.svc.cluster.local) is NXDOMAIN.
	out = run("nslookup -port=" + port + " -type=a myapp.default")
	if !strings.Contains(out, "myapp.default.svc.cluster.local") || !strings.Contains(out, "10.96.3.215") {
		t.Errorf("nslookup myapp.default:\n%s", out)
	}
	// dig +search walks the same list.
	testbed.RequireCommand(t, "dig")
	out = run("dig -p " + port + " +search +showsearch myapp A")
	for _, w := range []string{`status: NOERROR`, `myapp\.default\.svc\.cluster\.local\.\s+5\s+IN\s+A\s+10\.96\.3\.215`} {
		if !regexp.MustCompile(w).MatchString(out) {
			t.Errorf("dig +search myapp: lacks /%s/:\n%s", w, out)
		}
	}
	out = run("dig -p " + port + " +search +showsearch myapp.kube-system A")
	if !strings.Contains(out, "myapp.kube-system.default.svc.cluster.local") || !strings.Contains(out, "status: NXDOMAIN") {
		t.Errorf("dig +search over a missing name should walk every domain and end NXDOMAIN:\n%s", out)
	}
}
