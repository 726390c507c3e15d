// Command apidiff is the differential check of svcnet's API defaulting and
// validation against Kubernetes' own code at the version this module pins
// (k8s.io/kubernetes v1.37.2).
//
// For each case it runs, on the same versioned input,
//
//   - Kubernetes: v1 defaulting through the legacy scheme, conversion to the
//     internal type, the registry strategy's PrepareForCreate/PrepareForUpdate
//     and rest.ValidateCreate/rest.ValidateUpdate (the strategy's handwritten
//     validation, the generic ObjectMeta checks and declarative validation,
//     exactly as kube-apiserver's generic store runs them);
//   - svcnet: the registry strategy's Default, PrepareForCreate/PrepareForUpdate
//     and registry.ValidateCreate/registry.ValidateUpdate (what svcnet's store
//     runs);
//
// and compares the defaulted objects, the prepared objects and the complete,
// ordered error lists (type, field path, value and detail: the strings of the
// causes of a 422). Pods and Deployments are compared on defaulting only.
//
// Inputs are random combinations of field values (valid, invalid and edge
// cases) and mutations of valid stored objects. The run exits 1 if any case
// differs; -v prints every differing case.
package main

import (
	"flag"
	"fmt"
	"math/rand"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
)

// kind is one family of cases: gen draws the i-th case from r and check
// returns "" when both implementations agree, else a description.
type kind struct {
	name string
	run  func(r *rand.Rand) (diff string)
}

func main() {
	n := flag.Int("n", 10000, "cases per kind")
	seed := flag.Int64("seed", 1, "random seed (each kind derives its own stream from it)")
	only := flag.String("kind", "", "comma-separated kinds to run (default: all)")
	verbose := flag.Bool("v", false, "print every differing case (default: the first 3 per kind)")
	flag.Parse()
	// Kubernetes logs its own declarative-versus-handwritten mismatches
	// (metrics for its developers); they say nothing about svcnet.
	klog.SetLogger(logr.Discard())

	kinds := []kind{
		{"service-create", serviceCreateCase},
		{"service-update", serviceUpdateCase},
		{"service-status", serviceStatusCase},
		{"endpoints-create", endpointsCreateCase},
		{"endpoints-update", endpointsUpdateCase},
		{"endpointslice-create", sliceCreateCase},
		{"endpointslice-update", sliceUpdateCase},
		{"networkpolicy-create", networkPolicyCreateCase},
		{"networkpolicy-update", networkPolicyUpdateCase},
		{"servicecidr-create", serviceCIDRCreateCase},
		{"servicecidr-update", serviceCIDRUpdateCase},
		{"servicecidr-status", serviceCIDRStatusCase},
		{"ipaddress-create", ipAddressCreateCase},
		{"ipaddress-update", ipAddressUpdateCase},
		{"namespace-create", namespaceCreateCase},
		{"namespace-update", namespaceUpdateCase},
		{"namespace-status", namespaceStatusCase},
		{"namespace-finalize", namespaceFinalizeCase},
		{"node-create", nodeCreateCase},
		{"node-update", nodeUpdateCase},
		{"node-status", nodeStatusCase},
		{"configmap-create", configMapCreateCase},
		{"configmap-update", configMapUpdateCase},
		{"lease-create", leaseCreateCase},
		{"lease-update", leaseUpdateCase},
		{"role-create", roleCreateCase},
		{"role-update", roleUpdateCase},
		{"clusterrole-create", clusterRoleCreateCase},
		{"rolebinding-create", roleBindingCreateCase},
		{"rolebinding-update", roleBindingUpdateCase},
		{"clusterrolebinding-create", clusterRoleBindingCreateCase},
		{"clusterrolebinding-update", clusterRoleBindingUpdateCase},
		{"pod-default", podDefaultCase},
		{"pod-create", podCreateCase},
		{"pod-update", podUpdateCase},
		{"pod-admission-create", podAdmissionCreateCase},
		{"pod-admission-update", podAdmissionUpdateCase},
		{"deployment-podtemplate", deploymentPodCase},
		{"deployment-default", deploymentDefaultCase},
		{"deployment-create", deploymentCreateCase},
		{"deployment-update", deploymentUpdateCase},
		{"deployment-status", deploymentStatusCase},
		{"replicaset-create", replicaSetCreateCase},
		{"replicaset-update", replicaSetUpdateCase},
		{"replicaset-status", replicaSetStatusCase},
		{"daemonset-create", daemonSetCreateCase},
		{"daemonset-update", daemonSetUpdateCase},
		{"daemonset-status", daemonSetStatusCase},
		// Appended: each kind's random stream derives from its position.
		{"serviceaccount-create", serviceAccountCreateCase},
		{"serviceaccount-update", serviceAccountUpdateCase},
		{"ingress-create", ingressCreateCase},
		{"ingress-update", ingressUpdateCase},
		{"ingress-status", ingressStatusCase},
		{"ingressclass-create", ingressClassCreateCase},
		{"ingressclass-update", ingressClassUpdateCase},
		{"ingress-admission", ingressAdmissionCase},
		{"secret-create", secretCreateCase},
		{"secret-update", secretUpdateCase},
	}
	want := map[string]bool{}
	for _, k := range strings.Split(*only, ",") {
		if k != "" {
			want[k] = true
		}
	}
	start := time.Now()
	total := 0
	for ki, k := range kinds {
		if len(want) > 0 && !want[k.name] {
			continue
		}
		r := rand.New(rand.NewSource(*seed*1000 + int64(ki)))
		diffs := 0
		reasons := map[string]int{}
		for i := 0; i < *n; i++ {
			d := k.run(r)
			if d == "" {
				continue
			}
			diffs++
			reasons[firstLine(d)]++
			if *verbose || diffs <= 3 {
				fmt.Printf("--- %s case %d differs:\n%s\n", k.name, i, d)
			}
		}
		total += diffs
		fmt.Printf("%-22s %6d cases, %d differences\n", k.name, *n, diffs)
		if diffs > 0 {
			var keys []string
			for k := range reasons {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, key := range keys {
				fmt.Printf("    %5d x %s\n", reasons[key], key)
			}
		}
	}
	fmt.Printf("seed %d: %d differences in %.1fs\n", *seed, total, time.Since(start).Seconds())
	if total > 0 {
		os.Exit(1)
	}
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
