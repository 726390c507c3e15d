package metallb

import (
	"context"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func pool(ns, name string, addrs ...any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "metallb.io/v1beta1", "kind": "IPAddressPool",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec":     map[string]any{"addresses": addrs},
		"status":   map[string]any{"availableIPv4": int64(4)},
	}}
}

// TestPoolStrategy: the webhook checks run in the strategy against the
// stored pools of every namespace, an update is not compared with its own
// stored version, and status is kept (no status subresource).
func TestPoolStrategy(t *testing.T) {
	ctx := context.Background()
	s := NewIPAddressPoolStrategy()
	stored := []unstructured.Unstructured{*pool("other", "a", "10.0.0.0/30")}
	s.Lister = func(_ context.Context, gr schema.GroupResource) ([]unstructured.Unstructured, error) {
		if gr.Resource != "ipaddresspools" {
			t.Errorf("listed %v", gr)
		}
		return stored, nil
	}
	if _, err := s.BeginCreate(ctx, pool("ns", "b", "10.0.0.4/30"), false); err != nil {
		t.Errorf("disjoint pool: %v", err)
	}
	_, err := s.BeginCreate(ctx, pool("ns", "c", "10.0.0.2-10.0.0.9"), false)
	if !apierrors.IsForbidden(err) || !strings.HasPrefix(err.Error(), `admission webhook "ipaddresspoolvalidationwebhook.metallb.io" denied the request: `) ||
		!strings.Contains(err.Error(), "overlaps") {
		t.Errorf("overlap with a pool of another namespace: %v", err)
	}
	if _, err := s.BeginUpdate(ctx, pool("other", "a", "10.0.0.0/29"), pool("other", "a", "10.0.0.0/30"), false); err != nil {
		t.Errorf("update of the pool itself: %v", err)
	}
	if _, err := s.BeginCreate(ctx, pool("ns", "d", "nonsense"), false); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `invalid CIDR "nonsense"`) {
		t.Errorf("unparsable addresses: %v", err)
	}
	p := pool("ns", "b", "10.0.0.4/30")
	s.PrepareForCreate(ctx, p)
	if _, ok := p.Object["status"]; ok {
		t.Error("status kept on create: it is a subresource, as in MetalLB's CRD")
	}
}

// TestPoolStrategyDefaults: the CRD schema's defaults on write (Default)
// and on read from storage (DefaultStored); explicit values are kept.
func TestPoolStrategyDefaults(t *testing.T) {
	s := NewIPAddressPoolStrategy()
	for name, apply := range map[string]func(*unstructured.Unstructured){
		"Default":       func(u *unstructured.Unstructured) { s.Default(u) },
		"DefaultStored": func(u *unstructured.Unstructured) { s.DefaultStored(u) },
	} {
		p := pool("ns", "p", "10.0.0.0/30")
		apply(p)
		if a, _, _ := unstructured.NestedFieldNoCopy(p.Object, "spec", "autoAssign"); a != true {
			t.Errorf("%s: autoAssign %v", name, a)
		}
		if b, found, _ := unstructured.NestedFieldNoCopy(p.Object, "spec", "avoidBuggyIPs"); !found || b != false {
			t.Errorf("%s: avoidBuggyIPs %v (found %v)", name, b, found)
		}
		p = pool("ns", "p", "10.0.0.0/30")
		p.Object["spec"].(map[string]any)["autoAssign"] = false
		p.Object["spec"].(map[string]any)["avoidBuggyIPs"] = true
		apply(p)
		if p.Object["spec"].(map[string]any)["autoAssign"] != false || p.Object["spec"].(map[string]any)["avoidBuggyIPs"] != true {
			t.Errorf("%s: explicit values changed: %v", name, p.Object["spec"])
		}
	}
}
