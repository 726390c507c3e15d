package metallbstate

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynfake "k8s.io/client-go/dynamic/fake"

	metallbv1beta1 "github.com/svcnet/svcnet/apis/metallb/v1beta1"
)

func TestReporter(t *testing.T) {
	dyn := dynfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		metallbv1beta1.ConfigurationStatesResource: "ConfigurationStateList",
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	get := func(name string) *unstructured.Unstructured {
		u, err := dyn.Resource(metallbv1beta1.ConfigurationStatesResource).Namespace("metallb-system").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil
		}
		return u
	}
	// state is result | errorSummary | type status reason message of each condition.
	state := func(u *unstructured.Unstructured) string {
		if u == nil {
			return "<none>"
		}
		res, _, _ := unstructured.NestedString(u.Object, "status", "result")
		sum, _, _ := unstructured.NestedString(u.Object, "status", "errorSummary")
		out := res + " | " + sum
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, c := range conds {
			m := c.(map[string]any)
			out += " | " + m["type"].(string) + " " + m["status"].(string) + " " + m["reason"].(string) + " " + m["message"].(string)
		}
		return out
	}
	wait := func(name, want string) {
		t.Helper()
		var got string
		for i := 0; i < 200; i++ {
			if got = state(get(name)); got == want {
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Fatalf("%s: %q, want %q", name, got, want)
	}

	c := ForController(dyn, "metallb-system", nil)
	go c.Run(ctx)
	c.Set("pools", nil)
	wait("controller", "Valid |  | poolReconcilerValid True Reconciled ")
	if l := get("controller").GetLabels(); l["metallb.io/component-type"] != "controller" {
		t.Errorf("controller labels %v", l)
	}
	c.Set("pools", []string{`pool "b": invalid CIDR "x"`})
	wait("controller", `Invalid | pool "b": invalid CIDR "x" | poolReconcilerValid False ConfigurationError pool "b": invalid CIDR "x"`)
	c.Set("pools", nil)
	wait("controller", "Valid |  | poolReconcilerValid True Reconciled ")

	s := ForSpeaker(dyn, "metallb-system", "node-1", nil)
	go s.Run(ctx)
	s.Set("layer2", nil)
	s.Set("bgp", []string{"peer a", "peer b"})
	wait("speaker-node-1", "Invalid | peer a\npeer b | configReconcilerValid False ConfigurationError peer a\npeer b")
	if l := get("speaker-node-1").GetLabels(); l["metallb.io/component-type"] != "speaker" || l["metallb.io/node-name"] != "node-1" {
		t.Errorf("speaker labels %v", l)
	}
	s.Set("bgp", nil)
	wait("speaker-node-1", "Valid |  | configReconcilerValid True Reconciled ")

	var nilReporter *Reporter
	nilReporter.Set("x", []string{"y"}) // a component without a reporter
}
