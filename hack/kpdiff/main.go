// Command kpdiff is svcnet's differential check against the real
// kube-proxy: it generates scenarios (a node's configuration, Services and
// EndpointSlices), runs kube-proxy's own iptables and nftables proxiers
// (k8s.io/kubernetes pkg/proxy, with their fakes) and svcnet's iptables and
// nftables modes (with theirs) on each, and compares the normalised rules.
// It exits 1 if any scenario differs. See README.md.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
)

type modeRun struct {
	name     string
	kp, sv   func(*Scenario, v1.IPFamily) (string, error)
	diff     func(kp, sv string) []string
	differed int
	sigs     map[string][]int
	shown    int
}

var hashRE = regexp.MustCompile(`[A-Z2-7]{16}|[a-z2-7]{8}-|\d+`)

// signature groups differences of the same kind for the summary.
func signature(d string) string {
	if len(d) > 140 {
		d = d[:140]
	}
	return hashRE.ReplaceAllString(d, "#")
}

func main() {
	n := flag.Int("n", 1000, "scenarios to generate")
	seed := flag.Int64("seed", 1, "generator seed (scenario i of a seed is always the same)")
	start := flag.Int("start", 0, "first scenario id")
	modes := flag.String("modes", "iptables,nftables,ipvs,nftables-shards", "modes to compare (nftables-shards: svcnet with --nftables-shards=4 against kube-proxy's nftables table, by traced packet outcomes)")
	show := flag.Int("show", 2, "differing scenarios to print in full per mode")
	kinds := flag.Int("kinds", 15, "kinds of difference to list per mode")
	one := flag.Int("scenario", -1, "run only this scenario id and print its input and both outputs")
	flag.Parse()
	// kube-proxy logs through klog (for example "Service has no
	// healthcheck nodeport" for generated ETP Local Services); the
	// comparison is the output, so its logs are dropped.
	klog.SetLogger(logr.Discard())

	if err := initMakers(); err != nil {
		fmt.Fprintln(os.Stderr, "kpdiff:", err)
		os.Exit(2)
	}
	all := map[string]*modeRun{
		"iptables":        {name: "iptables", kp: kubeProxyIPTables, sv: svcnetIPTables, diff: diffIPTables},
		"nftables":        {name: "nftables", kp: kubeProxyNFTables, sv: svcnetNFTables, diff: diffNFT},
		"ipvs":            {name: "ipvs", kp: kubeProxyIPVS, sv: svcnetIPVS, diff: diffIPVS},
		"nftables-shards": {name: "nftables-shards", kp: kubeProxyNFTables, sv: svcnetNFTablesShards, diff: diffTraces},
	}
	var runs []*modeRun
	for _, m := range strings.Split(*modes, ",") {
		r := all[strings.TrimSpace(m)]
		if r == nil {
			fmt.Fprintf(os.Stderr, "kpdiff: unknown mode %q\n", m)
			os.Exit(2)
		}
		r.sigs = map[string][]int{}
		runs = append(runs, r)
	}
	first, count := *start, *n
	if *one >= 0 {
		first, count = *one, 1
	}
	t0 := time.Now()
	coverage := map[string]int{}
	for id := first; id < first+count; id++ {
		sc := Generate(*seed, id)
		for _, f := range sc.features() {
			coverage[f]++
		}
		if *one >= 0 {
			b, _ := json.MarshalIndent(sc, "", "  ")
			fmt.Printf("scenario %d (seed %d):\n%s\n", id, *seed, b)
		}
		for _, r := range runs {
			var diffs []string
			var outs []string
			for _, fam := range sc.Families {
				kp, err := r.kp(sc, fam)
				if err != nil {
					diffs = append(diffs, fmt.Sprintf("kube-proxy %s %s failed: %v", r.name, fam, err))
					continue
				}
				sv, err := r.sv(sc, fam)
				if err != nil {
					diffs = append(diffs, fmt.Sprintf("svcnet %s %s failed: %v", r.name, fam, err))
					continue
				}
				for _, d := range r.diff(kp, sv) {
					diffs = append(diffs, string(fam)+" "+d)
				}
				outs = append(outs, fmt.Sprintf("=== %s %s kube-proxy:\n%s\n=== %s %s svcnet:\n%s", r.name, fam, kp, r.name, fam, sv))
			}
			if *one >= 0 {
				fmt.Println(strings.Join(outs, "\n"))
			}
			if len(diffs) == 0 {
				continue
			}
			r.differed++
			seen := map[string]bool{}
			for _, d := range diffs {
				s := signature(d)
				if !seen[s] {
					seen[s] = true
					r.sigs[s] = append(r.sigs[s], id)
				}
			}
			if r.shown < *show || *one >= 0 {
				r.shown++
				fmt.Printf("--- %s: scenario %d (seed %d) differs (rerun: go run . -seed %d -scenario %d -modes %s):\n", r.name, id, *seed, *seed, id, r.name)
				for _, d := range diffs {
					fmt.Println("  " + d)
				}
			}
		}
	}
	fail := false
	fmt.Printf("\nkpdiff: kube-proxy %s vs svcnet, seed %d, scenarios %d..%d, %.1fs\n", kubeProxyVersion, *seed, first, first+count-1, time.Since(t0).Seconds())
	fmt.Println("scenarios exercising:")
	for _, k := range sortedKeys(coverage) {
		fmt.Printf("  %-34s %d\n", k, coverage[k])
	}
	for _, r := range runs {
		fmt.Printf("%s: %d scenarios, %d differ\n", r.name, count, r.differed)
		if r.differed > 0 {
			fail = true
			type kv struct {
				s   string
				ids []int
			}
			var list []kv
			for s, ids := range r.sigs {
				list = append(list, kv{s, ids})
			}
			sort.Slice(list, func(i, j int) bool { return len(list[i].ids) > len(list[j].ids) })
			for i, e := range list {
				if i == *kinds {
					fmt.Printf("  ... %d more kinds\n", len(list)-i)
					break
				}
				fmt.Printf("  %5d scenarios (e.g. %d): %s\n", len(e.ids), e.ids[0], e.s)
			}
		}
	}
	if fail {
		os.Exit(1)
	}
}

// kubeProxyVersion is the k8s.io/kubernetes version in go.mod.
const kubeProxyVersion = "v1.37.2"
