package vmtest

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"debug/elf"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"
)

// modulesWanted are loaded in the guest, with their dependencies first.
// Names absent from the kernel's tree must be built in.
var modulesWanted = []string{
	"crc32c_generic", "veth", "bridge", "dummy", "br_netfilter",
	"nf_conntrack", "nf_nat", "ip_vs", "ip_vs_rr", "ip_vs_wrr", "ip_vs_sh", "ip_vs_mh",
	"ip_set", "ip_set_hash_ip", "ip_set_hash_ipport", "ip_set_hash_ipportip", "ip_set_hash_ipportnet", "ip_set_bitmap_port",
	"ip_tables", "iptable_nat", "iptable_filter", "xt_set", "xt_comment", "xt_mark", "xt_addrtype", "xt_MASQUERADE",
	"xt_conntrack", "xt_physdev", "xt_ipvs", "ipt_REJECT", "xt_nat",
}

func cacheDir(t *testing.T) string {
	if d := os.Getenv("SVCNET_VMTEST_CACHE"); d != "" {
		return d
	}
	d, err := os.UserCacheDir()
	if err != nil {
		d = os.TempDir()
	}
	return filepath.Join(d, "svcnet-ipvsvm")
}

func run(t *testing.T, dir string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// kernelTree returns an unpacked linux-image package (boot/vmlinuz-*,
// lib/modules/<ver>/), downloading and unpacking it into the cache once.
func kernelTree(t *testing.T) (vmlinuz, modDir string) {
	cache := cacheDir(t)
	if err := os.MkdirAll(cache, 0o755); err != nil {
		t.Fatal(err)
	}
	deb := os.Getenv("SVCNET_VMTEST_KERNEL_DEB")
	if deb == "" {
		debs, _ := filepath.Glob(filepath.Join(cache, "linux-image-*-amd64_*.deb"))
		if len(debs) == 0 {
			for _, c := range []string{"apt-cache", "apt-get", "dpkg-deb"} {
				if _, err := exec.LookPath(c); err != nil {
					t.Fatalf("%s is needed to fetch Debian's kernel: %v", c, err)
				}
			}
			out := run(t, cache, "apt-cache", "depends", "linux-image-amd64")
			pkg := ""
			for _, l := range strings.Split(out, "\n") {
				f := strings.Fields(l)
				if len(f) == 2 && f[0] == "Depends:" && strings.HasPrefix(f[1], "linux-image-") {
					pkg = f[1]
					break
				}
			}
			if pkg == "" {
				t.Fatalf("apt-cache depends linux-image-amd64 names no versioned kernel:\n%s", out)
			}
			run(t, cache, "apt-get", "download", pkg)
			debs, _ = filepath.Glob(filepath.Join(cache, pkg+"_*.deb"))
			if len(debs) == 0 {
				t.Fatalf("apt-get download %s left no .deb in %s", pkg, cache)
			}
		}
		sort.Strings(debs)
		deb = debs[len(debs)-1]
	}
	tree := filepath.Join(cache, "tree-"+strings.TrimSuffix(filepath.Base(deb), ".deb"))
	if _, err := os.Stat(filepath.Join(tree, ".done")); err != nil {
		os.RemoveAll(tree)
		tmp := tree + ".tmp"
		os.RemoveAll(tmp)
		run(t, cache, "dpkg-deb", "-x", deb, tmp)
		if err := os.WriteFile(filepath.Join(tmp, ".done"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, tree); err != nil {
			t.Fatal(err)
		}
	}
	vm, _ := filepath.Glob(filepath.Join(tree, "boot", "vmlinuz-*"))
	mods, _ := filepath.Glob(filepath.Join(tree, "lib", "modules", "*"))
	if len(vm) != 1 || len(mods) != 1 {
		t.Fatalf("%s: want one vmlinuz and one module directory, got %v %v", tree, vm, mods)
	}
	return vm[0], mods[0]
}

func modName(path string) string {
	b := filepath.Base(path)
	b = b[:strings.Index(b, ".ko")]
	return strings.ReplaceAll(b, "-", "_")
}

// moduleOrder returns the files of the wanted modules and their
// dependencies, dependencies first.
func moduleOrder(t *testing.T, modDir string, wanted []string) []string {
	files := map[string]string{}
	filepath.WalkDir(filepath.Join(modDir, "kernel"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(p, ".ko") {
			files[modName(p)] = p
		}
		return nil
	})
	builtin, _ := os.ReadFile(filepath.Join(modDir, "modules.builtin"))
	isBuiltin := func(n string) bool {
		for _, l := range strings.Split(string(builtin), "\n") {
			if l != "" && modName(l) == n {
				return true
			}
		}
		return false
	}
	var order []string
	state := map[string]int{}
	var visit func(n string)
	visit = func(n string) {
		n = strings.ReplaceAll(n, "-", "_")
		if state[n] != 0 {
			return
		}
		state[n] = 1
		p, ok := files[n]
		if !ok {
			if !isBuiltin(n) {
				t.Fatalf("kernel module %s is neither in %s nor built in", n, modDir)
			}
			return
		}
		f, err := elf.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		sec := f.Section(".modinfo")
		var data []byte
		if sec != nil {
			data, _ = sec.Data()
		}
		f.Close()
		for _, kv := range bytes.Split(data, []byte{0}) {
			if deps, ok := bytes.CutPrefix(kv, []byte("depends=")); ok && len(deps) > 0 {
				for _, d := range strings.Split(string(deps), ",") {
					visit(d)
				}
			}
		}
		order = append(order, p)
	}
	for _, n := range wanted {
		visit(n)
	}
	return order
}

// cpioWriter writes a newc archive.
type cpioWriter struct {
	buf  bytes.Buffer
	ino  int
	seen map[string]bool
}

func (w *cpioWriter) entry(name string, mode uint32, data []byte) {
	name = strings.TrimPrefix(name, "/")
	if w.seen[name] {
		return
	}
	w.seen[name] = true
	w.ino++
	fmt.Fprintf(&w.buf, "070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
		w.ino, mode, 0, 0, 1, 0, len(data), 0, 0, 0, 0, len(name)+1, 0)
	w.buf.WriteString(name)
	w.buf.WriteByte(0)
	w.pad()
	w.buf.Write(data)
	w.pad()
}

func (w *cpioWriter) pad() {
	for w.buf.Len()%4 != 0 {
		w.buf.WriteByte(0)
	}
}

func (w *cpioWriter) dirs(p string) {
	d := filepath.Dir(strings.TrimPrefix(p, "/"))
	if d == "." || d == "" {
		return
	}
	w.dirs(d)
	w.entry(d, 0o040755, nil)
}

func (w *cpioWriter) file(t *testing.T, dst, src string, mode uint32) {
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	w.dirs(dst)
	w.entry(dst, 0o100000|mode, data)
}

func (w *cpioWriter) symlink(dst, target string) {
	w.dirs(dst)
	w.entry(dst, 0o120777, []byte(target))
}

func (w *cpioWriter) close() []byte {
	w.entry("TRAILER!!!", 0, nil)
	var gz bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&gz, gzip.BestSpeed)
	zw.Write(w.buf.Bytes())
	zw.Close()
	return gz.Bytes()
}

// libs returns the shared libraries (and loader) ldd lists for bins.
func libs(t *testing.T, bins []string) []string {
	set := map[string]bool{}
	for _, b := range bins {
		out, err := exec.Command("ldd", b).CombinedOutput()
		if err != nil {
			continue // static or not a dynamic executable
		}
		sc := bufio.NewScanner(bytes.NewReader(out))
		for sc.Scan() {
			for _, f := range strings.Fields(sc.Text()) {
				if strings.HasPrefix(f, "/") {
					set[f] = true
				}
			}
		}
	}
	var out []string
	for l := range set {
		out = append(out, l)
	}
	sort.Strings(out)
	return out
}

func lookPath(t *testing.T, name, pkg string) string {
	p, err := exec.LookPath(name)
	if err != nil {
		for _, d := range []string{"/usr/sbin", "/sbin"} {
			if _, err := os.Stat(filepath.Join(d, name)); err == nil {
				return filepath.Join(d, name)
			}
		}
		t.Fatalf("%s (Debian package %s) is needed in the VM: %v", name, pkg, err)
	}
	return p
}

func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return filepath.Join(runtime.GOROOT(), "bin", "go")
}

func buildInitramfs(t *testing.T, modDir string) []byte {
	dir := t.TempDir()
	guest := filepath.Join(dir, "init")
	cmd := exec.Command(goTool(), "build", "-o", guest, "./guest")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build guest: %v\n%s", err, out)
	}
	w := &cpioWriter{seen: map[string]bool{}}
	for _, d := range []string{"proc", "sys", "dev", "run", "tmp", "etc", "usr/lib", "usr/lib64", "usr/bin", "usr/sbin"} {
		w.dirs(d + "/x")
	}
	w.symlink("lib", "usr/lib")
	w.symlink("lib64", "usr/lib64")
	w.symlink("bin", "usr/bin")
	w.symlink("sbin", "usr/sbin")
	w.symlink("var/run", "../run")
	w.file(t, "init", guest, 0o755)
	w.file(t, "etc/protocols", "/etc/protocols", 0o644)

	bins := map[string]string{ // name in the VM -> host binary
		"usr/bin/ip":       lookPath(t, "ip", "iproute2"),
		"usr/sbin/ipvsadm": lookPath(t, "ipvsadm", "ipvsadm"),
		"usr/sbin/ipset":   lookPath(t, "ipset", "ipset"),
		"usr/bin/busybox":  lookPath(t, "busybox", "busybox-static"),
	}
	legacy := lookPath(t, "xtables-legacy-multi", "iptables")
	bins["usr/sbin/xtables-legacy-multi"] = legacy
	var hostBins []string
	for dst, src := range bins {
		real, err := filepath.EvalSymlinks(src)
		if err != nil {
			t.Fatal(err)
		}
		w.file(t, dst, real, 0o755)
		hostBins = append(hostBins, real)
	}
	for _, n := range []string{"iptables-legacy", "iptables-legacy-restore", "iptables-legacy-save", "ip6tables-legacy", "ip6tables-legacy-restore", "ip6tables-legacy-save"} {
		w.symlink("usr/sbin/"+n, "xtables-legacy-multi")
	}
	for _, n := range []string{"sh", "sysctl", "modprobe", "cat", "ls"} {
		w.symlink("usr/bin/"+n, "busybox")
	}
	xt, _ := filepath.Glob("/usr/lib/x86_64-linux-gnu/xtables/*.so")
	if len(xt) == 0 {
		t.Fatal("no iptables extensions in /usr/lib/x86_64-linux-gnu/xtables")
	}
	for _, so := range xt {
		w.file(t, so, so, 0o755)
	}
	for _, l := range libs(t, append(hostBins, xt...)) {
		real, err := filepath.EvalSymlinks(l)
		if err != nil {
			t.Fatal(err)
		}
		dst := l
		for _, pre := range []string{"/lib/", "/lib64/"} {
			if strings.HasPrefix(dst, pre) {
				dst = "/usr" + dst
			}
		}
		w.file(t, dst, real, 0o755)
	}
	var list strings.Builder
	for _, m := range moduleOrder(t, modDir, modulesWanted) {
		dst := "/modules/" + filepath.Base(m)
		w.file(t, dst, m, 0o644)
		list.WriteString(dst + "\n")
	}
	w.dirs("modules.list")
	w.entry("modules.list", 0o100644, []byte(list.String()))
	return w.close()
}

// TestIPVSInVM boots Debian's kernel under qemu and runs the guest's IPVS
// scenario there: ClusterIP and NodePort spread with rr, sh stickiness,
// ClientIP persistence, dump equal to `ipvsadm -Ln`, ipsets and iptables
// rules present, a removed endpoint getting no new connections, an
// externalIP two Services claim going to the older one and, once it is
// deleted, to the other (proxy/claims.go), cleanup.
func TestIPVSInVM(t *testing.T) {
	if testing.Short() {
		t.Skip("boots a VM (about 10-60 s); not run with -short")
	}
	qemu, err := exec.LookPath("qemu-system-x86_64")
	if err != nil {
		t.Skip("qemu-system-x86_64 is not installed (Debian package qemu-system-x86): cannot boot a kernel with IPVS")
	}
	vmlinuz, modDir := kernelTree(t)
	initrd := filepath.Join(t.TempDir(), "initrd.gz")
	if err := os.WriteFile(initrd, buildInitramfs(t, modDir), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, qemu, "-machine", "q35", "-accel", "tcg", "-m", "512", "-smp", "1",
		"-display", "none", "-monitor", "none", "-serial", "stdio", "-nic", "none", "-no-reboot",
		"-kernel", vmlinuz, "-initrd", initrd,
		"-append", "console=ttyS0 panic=-1 rdinit=/init quiet loglevel=3")
	start := time.Now()
	out, err := cmd.CombinedOutput()
	console := string(out)
	t.Logf("qemu ran %.1fs", time.Since(start).Seconds())
	switch {
	case strings.Contains(console, "SVCNET-VMTEST PASS"):
		for _, l := range strings.Split(console, "\n") {
			if strings.HasPrefix(l, "check:") || strings.Contains(l, "SVCNET-VMTEST") {
				t.Log(strings.TrimSpace(l))
			}
		}
	case strings.Contains(console, "SVCNET-VMTEST FAIL"):
		t.Fatalf("guest failed:\n%s", console)
	case ctx.Err() != nil:
		t.Fatalf("VM timed out without a result:\n%s", console)
	default:
		t.Fatalf("VM ended without a result (%v):\n%s", err, console)
	}
}
