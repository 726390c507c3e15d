package apiserver

import (
	"context"
	"fmt"
	"slices"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/svcnet/svcnet/allocator"
	"github.com/svcnet/svcnet/registry"
	"github.com/svcnet/svcnet/registry/networking"
	"github.com/svcnet/svcnet/registry/service"
)

var (
	serviceCIDRsResource = schema.GroupResource{Group: "networking.k8s.io", Resource: "servicecidrs"}
	ipAddressesResource  = schema.GroupResource{Group: "networking.k8s.io", Resource: "ipaddresses"}
)

// defaultServiceCIDRManager is the field manager of kube-apiserver's
// default ServiceCIDR controller.
const defaultServiceCIDRManager = "kubernetes-service-cidr-controller"

// startServiceCIDRs runs before anything is allocated: it makes the
// default ServiceCIDR "kubernetes" from --service-cluster-ip-range (as
// kube-apiserver's default ServiceCIDR controller: created if missing,
// single-stack upgraded to dual-stack when the flag gained a second CIDR,
// Ready=True set when unset and the CIDRs match; a mismatch is logged and
// left alone), then migrates ClusterIPs from the bitmap allocator of svcnet
// before 1.37 (etcd keys /registry/ranges/serviceips and
// .../secondaryserviceips): one repair pass creates the IPAddress of every
// Service's ClusterIP, unchanged, and the bitmaps are deleted once it
// succeeded. The default ServiceCIDR is kept in sync afterwards by
// syncDefaultServiceCIDR in the repair loop.
func (s *Server) startServiceCIDRs(ctx context.Context) error {
	if s.ipAddresses == nil {
		return nil
	}
	if err := s.syncDefaultServiceCIDR(ctx); err != nil {
		return err
	}
	resp, err := s.etcd.Get(ctx, allocator.KeyServiceIPs)
	if err != nil {
		return err
	}
	resp2, err := s.etcd.Get(ctx, service.KeySecondaryServiceIPs)
	if err != nil {
		return err
	}
	if resp.Count == 0 && resp2.Count == 0 {
		return nil
	}
	s.log.Info("migrating ClusterIPs from the bitmap allocator to IPAddress objects")
	if err := s.ipAddresses.Repair(ctx, s.listServices, s.reportRepair(ctx)); err != nil {
		return fmt.Errorf("migrate ClusterIPs: %w", err)
	}
	_, err = s.etcd.Txn(ctx).Then(clientv3.OpDelete(allocator.KeyServiceIPs), clientv3.OpDelete(service.KeySecondaryServiceIPs)).Commit()
	return err
}

func (s *Server) syncDefaultServiceCIDR(ctx context.Context) error {
	st := s.byGR[serviceCIDRsResource]
	want := []string{s.cfg.ServiceClusterIPRange.Masked().String()}
	if s.cfg.SecondaryServiceClusterIPRange.IsValid() {
		want = append(want, s.cfg.SecondaryServiceClusterIPRange.Masked().String())
	}
	opts := registry.WriteOptions{FieldManager: defaultServiceCIDRManager}
	obj, err := st.Get(ctx, "", networking.DefaultServiceCIDRName)
	if apierrors.IsNotFound(err) {
		obj, err = st.Create(ctx, "", &networkingv1.ServiceCIDR{ObjectMeta: metav1.ObjectMeta{Name: networking.DefaultServiceCIDRName},
			Spec: networkingv1.ServiceCIDRSpec{CIDRs: want}}, opts)
		if apierrors.IsAlreadyExists(err) {
			obj, err = st.Get(ctx, "", networking.DefaultServiceCIDRName)
		}
	}
	if err != nil {
		return err
	}
	cur := obj.(*networkingv1.ServiceCIDR)
	if len(want) == 2 && len(cur.Spec.CIDRs) == 1 && cur.Spec.CIDRs[0] == want[0] {
		s.log.Info("updating default ServiceCIDR from single-stack to dual-stack", "from", cur.Spec.CIDRs, "to", want)
		_, _, err := st.Update(ctx, "", cur.Name, func(_ context.Context, o runtime.Object) (runtime.Object, error) {
			if o == nil {
				return nil, apierrors.NewNotFound(serviceCIDRsResource, cur.Name)
			}
			c := o.(*networkingv1.ServiceCIDR)
			c.Spec.CIDRs = want
			return c, nil
		}, false, opts)
		return err
	}
	if cur.DeletionTimestamp != nil {
		return nil
	}
	if !slices.Equal(cur.Spec.CIDRs, want) {
		s.log.Warn("the default ServiceCIDR does not match --service-cluster-ip-range", "serviceCIDR", cur.Spec.CIDRs, "flag", want)
		return nil
	}
	if c := apimeta.FindStatusCondition(cur.Status.Conditions, networkingv1.ServiceCIDRConditionReady); c != nil && c.Status != metav1.ConditionUnknown {
		return nil
	}
	_, _, err = st.Update(ctx, "", cur.Name, func(_ context.Context, o runtime.Object) (runtime.Object, error) {
		if o == nil {
			return nil, apierrors.NewNotFound(serviceCIDRsResource, cur.Name)
		}
		c := o.(*networkingv1.ServiceCIDR)
		apimeta.SetStatusCondition(&c.Status.Conditions, metav1.Condition{Type: networkingv1.ServiceCIDRConditionReady,
			Status: metav1.ConditionTrue, Message: "Kubernetes default Service CIDR is ready", LastTransitionTime: metav1.NewTime(time.Now())})
		return c, nil
	}, false, registry.WriteOptions{FieldManager: defaultServiceCIDRManager, Subresource: "status"})
	return err
}
