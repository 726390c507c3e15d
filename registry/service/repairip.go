package service

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/svcnet/svcnet/allocator"
	"github.com/svcnet/svcnet/registry"
	"github.com/svcnet/svcnet/registry/networking"
)

// IPAddress repair grace periods, as kube-apiserver's: an IPAddress whose
// Service does not exist (yet) is kept for the request timeout, and one
// newer than its Service for a few seconds (a create being reverted).
const (
	orphanGrace   = 60 * time.Second
	newerIPGrace  = 5 * time.Second
	repairManager = "ipallocator-repair-controller"
)

func serviceRef(svc *corev1.Service) corev1.ObjectReference {
	return corev1.ObjectReference{Kind: "Service", APIVersion: "v1", Namespace: svc.Namespace, Name: svc.Name,
		UID: svc.UID, ResourceVersion: svc.ResourceVersion}
}

func ipAddressRef(ip *networkingv1.IPAddress) corev1.ObjectReference {
	return corev1.ObjectReference{Kind: "IPAddress", APIVersion: "networking.k8s.io/v1", Name: ip.Name,
		UID: ip.UID, ResourceVersion: ip.ResourceVersion}
}

// Repair makes the IPAddresses agree with the Services, as kube-apiserver's
// IPAddress repair controller does (one pass over everything; run it at
// start and periodically):
//   - a Service's ClusterIP without its IPAddress gets one (ClusterIPNotAllocated,
//     "...; repairing") — this is also how ClusterIPs allocated by svcnet's
//     former bitmap allocator are migrated, unchanged;
//   - an IPAddress referencing something else is recreated for the Service,
//     unless another Service really holds the address (ClusterIPAlreadyAllocated);
//   - a ClusterIP outside every ServiceCIDR is reported (ClusterIPOutOfRange);
//   - an IPAddress of the allocator whose Service is gone (after 60 s), or
//     whose Service does not hold it, is deleted (IPAddressNotAllocated,
//     IPAddressWrongReference).
//
// report receives each finding as a Conflict whose Service field is the
// object the Event is about (a Service or an IPAddress). IPAddresses are
// listed before Services, so an address allocated meanwhile is either seen
// or belongs to a Service the list does not show yet.
func (a *IPAddressAllocator) Repair(ctx context.Context, list func(context.Context) ([]corev1.Service, error), report func(allocator.Conflict)) error {
	if report == nil {
		report = func(allocator.Conflict) {}
	}
	l, err := a.IPAddresses.List(ctx, "", registry.ListOptions{})
	if err != nil {
		return fmt.Errorf("ipaddress repair: %w", err)
	}
	ips := map[string]*networkingv1.IPAddress{}
	items := l.(*networkingv1.IPAddressList).Items
	for i := range items {
		ips[items[i].Name] = &items[i]
	}
	var prefixes []netip.Prefix
	for _, fam := range []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol} {
		p, err := a.Prefixes(ctx, fam, false)
		if err != nil {
			return fmt.Errorf("ipaddress repair: %w", err)
		}
		prefixes = append(prefixes, p...)
	}
	svcs, err := list(ctx)
	if err != nil {
		return fmt.Errorf("ipaddress repair: list services: %w", err)
	}
	byName := map[string]*corev1.Service{}
	for i := range svcs {
		byName[svcs[i].Namespace+"/"+svcs[i].Name] = &svcs[i]
	}
	conflict := func(ref corev1.ObjectReference, reason, msg string) {
		report(allocator.Conflict{Service: ref, Reason: reason, Message: msg})
	}
	recreate := func(ip netip.Addr, svc *corev1.Service) error {
		if _, _, err := a.IPAddresses.Delete(ctx, "", ip.String(), registry.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		if err := a.create(ctx, ip, svc); err != nil && err != ErrAllocated {
			return err
		}
		return nil
	}
	var firstErr error
	keep := func(err error) {
		if err != nil && firstErr == nil {
			firstErr = err
		}
	}
	for _, svc := range byName {
		if svc.Spec.Type == corev1.ServiceTypeExternalName || IsHeadless(svc) {
			continue
		}
		for _, s := range svc.Spec.ClusterIPs {
			if s == "" || s == corev1.ClusterIPNone {
				continue
			}
			ip, err := netip.ParseAddr(s)
			if err != nil {
				conflict(serviceRef(svc), "ClusterIPNotValid", fmt.Sprintf("Cluster IP %s is not a valid IP; please recreate Service", s))
				continue
			}
			ip = ip.Unmap()
			fam := familyOf(ip)
			inRange := false
			for _, p := range prefixes {
				inRange = inRange || prefixContains(p, ip)
			}
			if !inRange {
				conflict(serviceRef(svc), "ClusterIPOutOfRange", fmt.Sprintf("Cluster IP [%v]: %s is not within any configured Service CIDR; please recreate service", fam, ip))
				continue
			}
			obj, ok := ips[ip.String()]
			if !ok {
				conflict(serviceRef(svc), "ClusterIPNotAllocated", fmt.Sprintf("Cluster IP [%v]: %s is not allocated; repairing", fam, ip))
				if err := a.create(ctx, ip, svc); err != nil && err != ErrAllocated {
					keep(err)
				}
				continue
			}
			ref := obj.Spec.ParentRef
			wrongRef := fmt.Sprintf("the ClusterIP [%v]: %s for Service %s/%s has a wrong reference; repairing", fam, ip, svc.Namespace, svc.Name)
			if ref == nil || ref.Group != "" || ref.Resource != "services" {
				conflict(serviceRef(svc), "ClusterIPNotAllocated", wrongRef)
				keep(recreate(ip, svc))
				continue
			}
			if ref.Namespace != svc.Namespace || ref.Name != svc.Name {
				other, exists := byName[ref.Namespace+"/"+ref.Name]
				if !exists {
					conflict(serviceRef(svc), "ClusterIPNotAllocated", wrongRef)
					keep(recreate(ip, svc))
					continue
				}
				for _, oip := range other.Spec.ClusterIPs {
					if oip == obj.Name {
						conflict(serviceRef(svc), "ClusterIPAlreadyAllocated", fmt.Sprintf("Cluster IP [%v]:%s was assigned to multiple services; please recreate service", fam, ip))
						break
					}
				}
			}
			if obj.Labels[networkingv1.LabelIPAddressFamily] != string(fam) || obj.Labels[networkingv1.LabelManagedBy] != networking.ManagedByIPAllocator {
				keep(recreate(ip, svc))
			}
		}
	}
	now := time.Now()
	for _, obj := range ips {
		if obj.Labels[networkingv1.LabelManagedBy] != networking.ManagedByIPAllocator {
			continue
		}
		ref := obj.Spec.ParentRef
		del := func(reason, msg string) {
			conflict(ipAddressRef(obj), reason, msg)
			if _, _, err := a.IPAddresses.Delete(ctx, "", obj.Name, registry.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				keep(err)
			}
		}
		if ref == nil || ref.Group != "" || ref.Resource != "services" {
			del("IPAddressNotAllocated", fmt.Sprintf("IPAddress %s appears to have been modified, not referencing a Service %v: cleaning up", obj.Name, ref))
			continue
		}
		age := now.Sub(obj.CreationTimestamp.Time)
		svc, exists := byName[ref.Namespace+"/"+ref.Name]
		if !exists {
			if age > orphanGrace {
				del("IPAddressNotAllocated", fmt.Sprintf("IPAddress: %s for Service %s/%s appears to have leaked: cleaning up", obj.Name, ref.Namespace, ref.Name))
			}
			continue
		}
		held := false
		for _, s := range svc.Spec.ClusterIPs {
			held = held || s == obj.Name
		}
		switch {
		case held:
		case svc.Spec.Type == corev1.ServiceTypeExternalName && age < orphanGrace:
		case obj.CreationTimestamp.After(svc.CreationTimestamp.Time) && age < newerIPGrace:
		default:
			del("IPAddressWrongReference", fmt.Sprintf("IPAddress: %s for Service %s/%s has a wrong reference; cleaning up", obj.Name, svc.Namespace, svc.Name))
		}
	}
	return firstErr
}
