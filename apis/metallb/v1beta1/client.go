package v1beta1

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
)

// FromUnstructured converts an unstructured object (as served by the
// dynamic client or informers) into one of this package's types.
func FromUnstructured(u *unstructured.Unstructured, out runtime.Object) error {
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, out); err != nil {
		return fmt.Errorf("convert %s %s/%s: %w", u.GetKind(), u.GetNamespace(), u.GetName(), err)
	}
	return nil
}

// ToUnstructured converts one of this package's objects for the dynamic
// client, setting apiVersion and kind.
func ToUnstructured(obj runtime.Object, kind string) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetAPIVersion(SchemeGroupVersion.String())
	u.SetKind(kind)
	return u, nil
}

// Client is a typed client for IPAddressPools and L2Advertisements built on
// the dynamic client.
type Client struct{ Dyn dynamic.Interface }

// IPAddressPools lists the pools of namespace ns ("" for all).
func (c Client) IPAddressPools(ctx context.Context, ns string) ([]IPAddressPool, error) {
	l, err := c.Dyn.Resource(IPAddressPoolsResource).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list ipaddresspools: %w", err)
	}
	out := make([]IPAddressPool, len(l.Items))
	for i := range l.Items {
		if err := FromUnstructured(&l.Items[i], &out[i]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// CreateIPAddressPool creates a pool and returns it as stored.
func (c Client) CreateIPAddressPool(ctx context.Context, p *IPAddressPool) (*IPAddressPool, error) {
	u, err := ToUnstructured(p, "IPAddressPool")
	if err != nil {
		return nil, err
	}
	got, err := c.Dyn.Resource(IPAddressPoolsResource).Namespace(p.Namespace).Create(ctx, u, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("create ipaddresspool %s/%s: %w", p.Namespace, p.Name, err)
	}
	out := &IPAddressPool{}
	return out, FromUnstructured(got, out)
}

// DeleteIPAddressPool deletes a pool.
func (c Client) DeleteIPAddressPool(ctx context.Context, ns, name string) error {
	return c.Dyn.Resource(IPAddressPoolsResource).Namespace(ns).Delete(ctx, name, metav1.DeleteOptions{})
}

// L2Advertisements lists the L2Advertisements of namespace ns ("" for all).
func (c Client) L2Advertisements(ctx context.Context, ns string) ([]L2Advertisement, error) {
	l, err := c.Dyn.Resource(L2AdvertisementsResource).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list l2advertisements: %w", err)
	}
	out := make([]L2Advertisement, len(l.Items))
	for i := range l.Items {
		if err := FromUnstructured(&l.Items[i], &out[i]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// CreateL2Advertisement creates an L2Advertisement.
func (c Client) CreateL2Advertisement(ctx context.Context, a *L2Advertisement) (*L2Advertisement, error) {
	u, err := ToUnstructured(a, "L2Advertisement")
	if err != nil {
		return nil, err
	}
	got, err := c.Dyn.Resource(L2AdvertisementsResource).Namespace(a.Namespace).Create(ctx, u, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("create l2advertisement %s/%s: %w", a.Namespace, a.Name, err)
	}
	out := &L2Advertisement{}
	return out, FromUnstructured(got, out)
}
