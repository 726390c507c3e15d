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
