// Command iptorder measures how the order of the chain declarations in an
// iptables-restore payload changes the time iptables-restore takes, the
// finding behind svcnet's iptables plan declaring its chains in descending
// name order (docs/proxy-modes.md, "Chains declared in descending name
// order"). It builds one payload of -chains KUBE-SEP-style chains with one
// DNAT rule each, with the declarations and the rules each in ascending,
// descending or hash order, and times `iptables-restore --noflush` of each
// combination in a throwaway network namespace of its own (flushed between
// runs, deleted at the end). It is a benchmark, never a test:
//
//	go run ./bench/iptorder [-chains 20000] [-runs 1] [-legacy]
//
// It needs root and the iptables programs; it sends no packets.
package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/base32"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"
)

func main() {
	n := flag.Int("chains", 20000, "chains (one rule each)")
	runs := flag.Int("runs", 1, "repetitions of each combination (the median is printed)")
	legacy := flag.Bool("legacy", false, "time iptables-legacy-restore instead of the system's iptables-restore")
	flag.Parse()
	iptables, restore, variant := "iptables", "iptables-restore", "system's iptables-restore"
	if *legacy {
		iptables, restore, variant = "iptables-legacy", "iptables-legacy-restore", "iptables-legacy-restore"
	}
	ns := fmt.Sprintf("svcnet-iptorder-%d", os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "ip netns add: %v: %s\n", err, out)
		os.Exit(1)
	}
	defer exec.Command("ip", "netns", "del", ns).Run()
	// Interrupted: the namespace goes too.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sig
		_ = exec.Command("ip", "netns", "del", ns).Run()
		os.Exit(1)
	}()

	names := make([]string, *n)
	for i := range names {
		h := sha256.Sum256([]byte(fmt.Sprint(i)))
		names[i] = "KUBE-SEP-" + base32.StdEncoding.EncodeToString(h[:])[:16]
	}
	order := func(o string) []string {
		l := slices.Clone(names)
		switch o {
		case "ascending":
			slices.Sort(l)
		case "descending":
			slices.Sort(l)
			slices.Reverse(l)
		default: // hash: the order a Go map gives, as kube-proxy writes them
			rand.New(rand.NewPCG(1, 2)).Shuffle(len(l), func(i, j int) { l[i], l[j] = l[j], l[i] })
		}
		return l
	}
	fmt.Printf("%d chains, one rule each; %s --noflush, median of %d run(s)\n", *n, variant, *runs)
	fmt.Printf("%-12s %-12s %s\n", "declared", "rules", "seconds")
	for _, decl := range []string{"hash", "ascending", "descending"} {
		for _, rules := range []string{"hash", "ascending", "descending"} {
			var b bytes.Buffer
			b.WriteString("*nat\n")
			for _, c := range order(decl) {
				fmt.Fprintf(&b, ":%s - [0:0]\n", c)
			}
			for _, c := range order(rules) {
				fmt.Fprintf(&b, "-A %s -p tcp -j DNAT --to-destination 10.1.0.2:8080\n", c)
			}
			b.WriteString("COMMIT\n")
			var ts []float64
			for r := 0; r < *runs; r++ {
				flush := exec.Command("ip", "netns", "exec", ns, "sh", "-c", iptables+" -t nat -F && "+iptables+" -t nat -X")
				if out, err := flush.CombinedOutput(); err != nil {
					fmt.Fprintf(os.Stderr, "flush: %v: %s\n", err, out)
					return
				}
				cmd := exec.Command("ip", "netns", "exec", ns, restore, "--noflush")
				cmd.Stdin = bytes.NewReader(b.Bytes())
				t0 := time.Now()
				if out, err := cmd.CombinedOutput(); err != nil {
					fmt.Fprintf(os.Stderr, "iptables-restore: %v: %s\n", err, strings.TrimSpace(string(out)))
					return
				}
				ts = append(ts, time.Since(t0).Seconds())
			}
			slices.Sort(ts)
			fmt.Printf("%-12s %-12s %.2f\n", decl, rules, ts[len(ts)/2])
		}
	}
}
