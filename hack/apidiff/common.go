package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/kubernetes/pkg/api/legacyscheme"

	"github.com/svcnet/svcnet/registry"

	// The internal types, their conversions, defaulters and declarative
	// validations, registered into legacyscheme as kube-apiserver does.
	_ "k8s.io/kubernetes/pkg/apis/apps/install"
	_ "k8s.io/kubernetes/pkg/apis/coordination/install"
	_ "k8s.io/kubernetes/pkg/apis/core/install"
	_ "k8s.io/kubernetes/pkg/apis/discovery/install"
	_ "k8s.io/kubernetes/pkg/apis/networking/install"
	_ "k8s.io/kubernetes/pkg/apis/rbac/install"
)

const namespace = "default"

// requestCtx is the context kube-apiserver's handlers give the registry:
// namespace and request info (declarative validation picks the API version
// and subresource from it).
func requestCtx(verb, group, version, resource, subresource, name string) context.Context {
	ctx := genericapirequest.WithNamespace(context.Background(), namespace)
	return genericapirequest.WithRequestInfo(ctx, &genericapirequest.RequestInfo{
		IsResourceRequest: true, Verb: verb, APIGroup: group, APIVersion: version,
		Resource: resource, Subresource: subresource, Namespace: namespace, Name: name,
	})
}

// clusterCtx is requestCtx for a cluster-scoped resource.
func clusterCtx(verb, group, version, resource, subresource, name string) context.Context {
	return genericapirequest.WithRequestInfo(context.Background(), &genericapirequest.RequestInfo{
		IsResourceRequest: true, Verb: verb, APIGroup: group, APIVersion: version,
		Resource: resource, Subresource: subresource, Name: name,
	})
}

// toInternal converts a defaulted versioned object to its internal type.
func toInternal(in runtime.Object, out runtime.Object) {
	if err := legacyscheme.Scheme.Convert(in, out, nil); err != nil {
		panic(fmt.Sprintf("convert %T to %T: %v", in, out, err))
	}
}

// errLines renders an error list the way the causes of a 422 carry it.
func errLines(l field.ErrorList) string {
	var out []string
	for _, e := range l {
		s := e.Error()
		// A refused pod spec change ends with a diff of the spec, which
		// kube-apiserver writes of its internal types and svcnet of the v1
		// types: compare the first line.
		if i := strings.Index(s, "\n"); i >= 0 && strings.Contains(s, "pod updates may not change fields other than") {
			s = s[:i] + " [diff]"
		}
		out = append(out, s)
	}
	return strings.Join(out, "\n")
}

// compareErrs describes a difference between Kubernetes' and svcnet's error
// lists, or returns "".
func compareErrs(what string, k8s, svcnet field.ErrorList) string {
	a, b := errLines(k8s), errLines(svcnet)
	if a == b {
		return ""
	}
	return fmt.Sprintf("%s errors differ\n  kubernetes:\n%s\n  svcnet:\n%s", what, indent(a), indent(b))
}

// sameMoment: two timestamps both strategies set to "now" (a condition's
// transition time) match when both are set and within a minute.
var sameMoment = cmp.Comparer(func(a, b metav1.Time) bool {
	if a.IsZero() || b.IsZero() {
		return a.IsZero() == b.IsZero()
	}
	d := a.Sub(b.Time)
	return d < time.Minute && d > -time.Minute
})

// sameBytes compares byte slices whole: go-cmp walks them element by
// element, seconds for a Secret's megabyte of data.
var sameBytes = cmp.Comparer(func(a, b []byte) bool { return bytes.Equal(a, b) })

// compareObjs describes a difference between two objects, or returns "".
func compareObjs(what string, k8s, svcnet any) string {
	if d := cmp.Diff(k8s, svcnet, sameMoment, sameBytes); d != "" {
		return fmt.Sprintf("%s objects differ (-kubernetes +svcnet):\n%s", what, d)
	}
	return ""
}

func indent(s string) string {
	if s == "" {
		return "    (none)"
	}
	return "    " + strings.ReplaceAll(s, "\n", "\n    ")
}

// withInput appends the case's input to a difference report.
func withInput(diff string, objs ...any) string {
	if diff == "" {
		return ""
	}
	for _, o := range objs {
		b, _ := json.Marshal(o)
		diff += "\n  input: " + string(b)
	}
	return diff
}

// joinDiffs returns the first non-empty description.
func joinDiffs(ds ...string) string {
	for _, d := range ds {
		if d != "" {
			return d
		}
	}
	return ""
}

func pick[T any](r *rand.Rand, vals ...T) T { return vals[r.Intn(len(vals))] }

func ptr[T any](v T) *T { return &v }

// maybe returns true with probability p.
func maybe(r *rand.Rand, p float64) bool { return r.Float64() < p }

// warnings is a request's warning recorder: the warnings kube-apiserver's
// PrepareForCreate adds (the pod strategy's, for AppArmor annotations), to
// which the strategy's WarningsOnCreate are appended as the handler does.
// kube-apiserver's recorder also drops a text it has already recorded;
// svcnet's API server sends every warning its strategy gives, so that step
// is left out here (the strategies are compared, not the servers).
type warnings struct{ list []string }

func (w *warnings) AddWarning(_, text string) { w.list = append(w.list, text) }

// compareWarnings compares the warnings of a successful write (the Warning
// headers kubectl prints), in order (but for the runs mapOrderWarnings
// sorts).
func compareWarnings(what string, k8s, svcnet []string) string {
	a, b := strings.Join(mapOrderWarnings(k8s), "\n"), strings.Join(mapOrderWarnings(svcnet), "\n")
	if a == b {
		return ""
	}
	return fmt.Sprintf("%s warnings differ\n  kubernetes:\n%s\n  svcnet:\n%s", what, indent(a), indent(b))
}

// createWarnings and updateWarnings are svcnet's warnings for a write, from
// the strategy's registry.CreateWarner / UpdateWarner (none without).
func createWarnings(ctx context.Context, st registry.Strategy, obj runtime.Object) []string {
	if w, ok := st.(registry.CreateWarner); ok {
		return w.WarningsOnCreate(ctx, obj)
	}
	return nil
}

func updateWarnings(ctx context.Context, st registry.Strategy, obj, old runtime.Object) []string {
	if w, ok := st.(registry.UpdateWarner); ok {
		return w.WarningsOnUpdate(ctx, obj, old)
	}
	return nil
}

// mapOrderWarnings returns ws with each run of consecutive warnings about
// the entries of a pod's (or pod template's) nodeSelector sorted:
// kube-apiserver's GetWarningsForPod reports them as it ranges over the map,
// so their order is random there (svcnet reports them in key order). Only
// these runs are sorted: every other warning keeps its place.
func mapOrderWarnings(ws []string) []string {
	isNodeSelector := func(w string) bool {
		return strings.HasPrefix(w, "spec.nodeSelector[") || strings.HasPrefix(w, "spec.template.spec.nodeSelector[")
	}
	out := slices.Clone(ws)
	for i := 0; i < len(out); {
		j := i
		for j < len(out) && isNodeSelector(out[j]) {
			j++
		}
		if j > i {
			sort.Strings(out[i:j])
			i = j
		} else {
			i++
		}
	}
	return out
}
