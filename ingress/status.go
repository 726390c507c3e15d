package ingress

import (
	"cmp"
	"context"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// StatusAddresses turns addresses into status entries: an IP address as ip,
// anything else as hostname; sorted and without duplicates.
func StatusAddresses(addrs []string) []networkingv1.IngressLoadBalancerIngress {
	var out []networkingv1.IngressLoadBalancerIngress
	for _, a := range addrs {
		a = strings.TrimSpace(a)
		if a == "" {
			continue
		}
		var e networkingv1.IngressLoadBalancerIngress
		if ip, err := netip.ParseAddr(a); err == nil {
			e.IP = ip.String()
		} else {
			e.Hostname = strings.TrimSuffix(a, ".")
		}
		out = append(out, e)
	}
	sortLB(out)
	return slices.CompactFunc(out, func(a, b networkingv1.IngressLoadBalancerIngress) bool {
		return a.IP == b.IP && a.Hostname == b.Hostname
	})
}

func sortLB(l []networkingv1.IngressLoadBalancerIngress) {
	slices.SortFunc(l, func(a, b networkingv1.IngressLoadBalancerIngress) int {
		if c := cmp.Compare(a.IP, b.IP); c != 0 {
			return c
		}
		return cmp.Compare(a.Hostname, b.Hostname)
	})
}

// ServiceStatusAddresses are the addresses --publish-service publishes, as
// ingress-nginx takes them: an ExternalName Service's external name; else the
// Service's load-balancer ingress (IPs and hostnames) and its externalIPs;
// when it has neither, its ClusterIP.
func ServiceStatusAddresses(svc *corev1.Service) []string {
	if svc == nil {
		return nil
	}
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		return []string{svc.Spec.ExternalName}
	}
	var out []string
	for _, in := range svc.Status.LoadBalancer.Ingress {
		if in.IP != "" {
			out = append(out, in.IP)
		} else if in.Hostname != "" {
			out = append(out, in.Hostname)
		}
	}
	out = append(out, svc.Spec.ExternalIPs...)
	if len(out) == 0 && svc.Spec.ClusterIP != "" && svc.Spec.ClusterIP != corev1.ClusterIPNone {
		out = append(out, svc.Spec.ClusterIPs...)
		if len(out) == 0 {
			out = append(out, svc.Spec.ClusterIP)
		}
	}
	return out
}

// lbEqual compares status entries by address (ports are not written by
// svcnet and not compared).
func lbEqual(a, b []networkingv1.IngressLoadBalancerIngress) bool {
	if len(a) != len(b) {
		return false
	}
	a, b = slices.Clone(a), slices.Clone(b)
	sortLB(a)
	sortLB(b)
	for i := range a {
		if a[i].IP != b[i].IP || a[i].Hostname != b[i].Hostname {
			return false
		}
	}
	return true
}

// written is what this instance wrote into an Ingress's status.
type written struct {
	uid   types.UID
	addrs []networkingv1.IngressLoadBalancerIngress
	// over is the cached object the last write replaced. While the
	// informer has not delivered the written object the lister returns that
	// same object: it is stale, not a status to correct again.
	over *networkingv1.Ingress
}

// syncStatus writes status.loadBalancer.ingress of the served Ingresses
// where it differs from the published addresses, and clears it on the
// Ingresses this instance wrote and no longer serves (if it still holds
// what was written). It records the table's problems as Events. It runs on
// the leader only.
func (c *Controller) syncStatus(ctx context.Context) {
	t := c.proxy.Table()
	if t == nil {
		return
	}
	c.recordEvents(t)
	if !c.cfg.UpdateStatus {
		return
	}
	want, ok := c.statusAddresses()
	if !ok {
		return
	}
	retry := false
	served := make(map[types.NamespacedName]bool, len(t.Served))
	for _, ing := range t.Served {
		key := types.NamespacedName{Namespace: ing.Namespace, Name: ing.Name}
		served[key] = true
		cur, err := c.ingresses.Ingresses(ing.Namespace).Get(ing.Name)
		if err != nil || cur.UID != ing.UID {
			continue
		}
		var over *networkingv1.Ingress
		if !lbEqual(cur.Status.LoadBalancer.Ingress, want) {
			if w, ok := c.written[key]; ok && w.over == cur && lbEqual(w.addrs, want) {
				continue // the cache has not caught up with that write yet
			}
			if err := c.writeStatus(ctx, cur, want); err != nil {
				retry = true
				continue
			}
			over = cur
		}
		if len(want) > 0 || over != nil {
			c.written[key] = written{uid: cur.UID, addrs: want, over: over}
		} else {
			delete(c.written, key)
		}
	}
	for key, w := range c.written {
		if served[key] {
			continue
		}
		cur, err := c.ingresses.Ingresses(key.Namespace).Get(key.Name)
		if err == nil && len(w.addrs) > 0 && cur.UID == w.uid && (cur == w.over || lbEqual(cur.Status.LoadBalancer.Ingress, w.addrs)) {
			if err := c.writeStatus(ctx, cur, nil); err != nil {
				retry = true
				continue
			}
		}
		delete(c.written, key)
	}
	if retry {
		if r := c.statusRunner.Load(); r != nil {
			r.RetryAfter(retryDelay)
		}
	}
}

func (c *Controller) writeStatus(ctx context.Context, cur *networkingv1.Ingress, addrs []networkingv1.IngressLoadBalancerIngress) error {
	ing := cur.DeepCopy()
	ing.Status.LoadBalancer.Ingress = addrs
	_, err := c.cfg.Client.NetworkingV1().Ingresses(ing.Namespace).UpdateStatus(ctx, ing, metav1.UpdateOptions{})
	switch {
	case err == nil:
		c.cfg.Metrics.StatusUpdates.WithLabelValues("success").Inc()
		c.log.Info("updated ingress status", "ingress", ing.Namespace+"/"+ing.Name, "addresses", lbString(addrs))
	case apierrors.IsNotFound(err):
		return nil
	default:
		c.cfg.Metrics.StatusUpdates.WithLabelValues("error").Inc()
		c.log.Warn("cannot update ingress status", "ingress", ing.Namespace+"/"+ing.Name, "err", err)
	}
	return err
}

func lbString(l []networkingv1.IngressLoadBalancerIngress) string {
	s := make([]string, 0, len(l))
	for _, e := range l {
		s = append(s, e.IP+e.Hostname)
	}
	return strings.Join(s, ",")
}

// statusAddresses are the addresses to publish: --publish-status-address
// when given, else those of --publish-service (none while it does not
// exist); ok is false when neither is configured, and status is then left
// alone.
func (c *Controller) statusAddresses() ([]networkingv1.IngressLoadBalancerIngress, bool) {
	if len(c.cfg.PublishStatusAddresses) > 0 {
		return StatusAddresses(c.cfg.PublishStatusAddresses), true
	}
	if ps := c.cfg.PublishService; ps != nil && c.publish != nil {
		svc, err := c.publish.Services(ps.Namespace).Get(ps.Name)
		if err != nil {
			return nil, true
		}
		return StatusAddresses(ServiceStatusAddresses(svc)), true
	}
	return nil, false
}
