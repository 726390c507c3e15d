package agent

import (
	"bufio"
	"context"
	"fmt"
	"net/netip"
	"os"
	"runtime"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/version"
)

// NodeLeaseNamespace holds one Lease per node.
const NodeLeaseNamespace = "kube-node-lease"

// leaseDurationSeconds is the kubelet's default node lease duration.
const leaseDurationSeconds = 40

// MaxPods is the pod capacity the node reports (the kubelet's default).
const MaxPods = 110

func (a *Agent) nodeLabels() map[string]string {
	l := map[string]string{
		"kubernetes.io/hostname":  a.cfg.NodeName,
		"kubernetes.io/os":        runtime.GOOS,
		"kubernetes.io/arch":      runtime.GOARCH,
		"beta.kubernetes.io/os":   runtime.GOOS,
		"beta.kubernetes.io/arch": runtime.GOARCH,
	}
	for k, v := range a.cfg.Labels {
		l[k] = v
	}
	return l
}

func memTotal() resource.Quantity {
	f, err := os.Open("/proc/meminfo")
	if err == nil {
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			var kb int64
			if n, _ := fmt.Sscanf(sc.Text(), "MemTotal: %d kB", &kb); n == 1 {
				return *resource.NewQuantity(kb*1024, resource.BinarySI)
			}
		}
	}
	return resource.MustParse("0")
}

func readTrim(path string) string {
	b, _ := os.ReadFile(path)
	return strings.TrimSpace(string(b))
}

func osImage() string {
	b, err := os.ReadFile("/etc/os-release")
	if err != nil {
		return "Linux"
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "PRETTY_NAME="); ok {
			return strings.Trim(v, `"`)
		}
	}
	return "Linux"
}

// nodeStatus is the status the agent reports, with heartbeat time now.
func (a *Agent) nodeStatus(now metav1.Time, prev []v1.NodeCondition) v1.NodeStatus {
	capacity := v1.ResourceList{
		v1.ResourceCPU:    *resource.NewQuantity(int64(runtime.NumCPU()), resource.DecimalSI),
		v1.ResourceMemory: memTotal(),
		v1.ResourcePods:   *resource.NewQuantity(MaxPods, resource.DecimalSI),
	}
	cond := func(t v1.NodeConditionType, s v1.ConditionStatus, reason, msg string) v1.NodeCondition {
		c := v1.NodeCondition{Type: t, Status: s, Reason: reason, Message: msg, LastHeartbeatTime: now, LastTransitionTime: now}
		for _, p := range prev {
			if p.Type == t && p.Status == s {
				c.LastTransitionTime = p.LastTransitionTime
			}
		}
		return c
	}
	st := v1.NodeStatus{
		Capacity:    capacity,
		Allocatable: capacity.DeepCopy(),
		Conditions: []v1.NodeCondition{
			cond(v1.NodeMemoryPressure, v1.ConditionFalse, "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
			cond(v1.NodeDiskPressure, v1.ConditionFalse, "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
			cond(v1.NodePIDPressure, v1.ConditionFalse, "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
			cond(v1.NodeReady, v1.ConditionTrue, "KubeletReady", "kubelet is posting ready status"),
		},
		Addresses:       []v1.NodeAddress{{Type: v1.NodeHostName, Address: a.cfg.NodeName}},
		DaemonEndpoints: v1.NodeDaemonEndpoints{KubeletEndpoint: v1.DaemonEndpoint{Port: 10250}},
		NodeInfo: v1.NodeSystemInfo{
			MachineID:               readTrim("/etc/machine-id"),
			BootID:                  readTrim("/proc/sys/kernel/random/boot_id"),
			KernelVersion:           readTrim("/proc/sys/kernel/osrelease"),
			OSImage:                 osImage(),
			ContainerRuntimeVersion: "svcnet://" + version.Version,
			KubeletVersion:          version.KubernetesGitVersion,
			KubeProxyVersion:        "",
			OperatingSystem:         runtime.GOOS,
			Architecture:            runtime.GOARCH,
		},
	}
	// InternalIPs first, the primary family's first, as the kubelet lists
	// them on a dual-stack node.
	var ips []v1.NodeAddress
	for _, ip := range a.nodeIPs() {
		ips = append(ips, v1.NodeAddress{Type: v1.NodeInternalIP, Address: ip.String()})
	}
	st.Addresses = append(ips, st.Addresses...)
	return st
}

// registerNode creates the Node, or takes over an existing one (a restarted
// agent, or a second `svcnet up` on the same data dir): its labels and
// podCIDR are set, and its status replaced.
func (a *Agent) registerNode(ctx context.Context) error {
	nodes := a.client.CoreV1().Nodes()
	now := metav1.Now()
	node := &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: a.cfg.NodeName, Labels: a.nodeLabels()},
		Status:     a.nodeStatus(now, nil),
	}
	node.Spec.Taints = a.cfg.Taints
	if a.cfg.PodCIDR.IsValid() {
		node.Spec.PodCIDR = a.cfg.PodCIDR.String()
		node.Spec.PodCIDRs = []string{a.cfg.PodCIDR.String()}
		if a.cfg.SecondaryPodCIDR.IsValid() {
			node.Spec.PodCIDRs = append(node.Spec.PodCIDRs, a.cfg.SecondaryPodCIDR.String())
		}
	}
	created, err := nodes.Create(ctx, node, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cur, err := nodes.Get(ctx, a.cfg.NodeName, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if cur.Labels == nil {
				cur.Labels = map[string]string{}
			}
			for k, v := range node.Labels {
				cur.Labels[k] = v
			}
			if cur.Spec.PodCIDR == "" {
				cur.Spec.PodCIDR, cur.Spec.PodCIDRs = node.Spec.PodCIDR, node.Spec.PodCIDRs
			}
			cur.Spec.Unschedulable = false
			created, err = nodes.Update(ctx, cur, metav1.UpdateOptions{})
			return err
		})
	}
	if err != nil {
		return fmt.Errorf("register node %s: %w", a.cfg.NodeName, err)
	}
	created.Status = node.Status
	if _, err := nodes.UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("register node %s status: %w", a.cfg.NodeName, err)
	}
	a.log.Info("node registered", "podCIDR", node.Spec.PodCIDR, "ip", a.cfg.NodeIP)
	return a.renewLease(ctx)
}

// renewLease creates or renews the node's Lease, owned by the Node so that
// deleting the Node deletes it.
func (a *Agent) renewLease(ctx context.Context) error {
	leases := a.client.CoordinationV1().Leases(NodeLeaseNamespace)
	now := metav1.NewMicroTime(time.Now())
	l, err := leases.Get(ctx, a.cfg.NodeName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		var owner []metav1.OwnerReference
		if n, err := a.client.CoreV1().Nodes().Get(ctx, a.cfg.NodeName, metav1.GetOptions{}); err == nil {
			owner = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: n.Name, UID: n.UID}}
		}
		_, err = leases.Create(ctx, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: a.cfg.NodeName, Namespace: NodeLeaseNamespace, OwnerReferences: owner},
			Spec: coordinationv1.LeaseSpec{
				HolderIdentity:       ptr.To(a.cfg.NodeName),
				LeaseDurationSeconds: ptr.To[int32](leaseDurationSeconds),
				RenewTime:            &now,
			},
		}, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("create node lease: %w", err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("get node lease: %w", err)
	}
	l.Spec.HolderIdentity = ptr.To(a.cfg.NodeName)
	l.Spec.LeaseDurationSeconds = ptr.To[int32](leaseDurationSeconds)
	l.Spec.RenewTime = &now
	if _, err := leases.Update(ctx, l, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("renew node lease: %w", err)
	}
	return nil
}

func (a *Agent) leaseLoop(ctx context.Context) {
	t := time.NewTicker(a.cfg.LeaseInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := a.renewLease(ctx); err != nil && ctx.Err() == nil {
				a.log.Warn("lease", "err", err)
			}
		}
	}
}

func (a *Agent) statusLoop(ctx context.Context) {
	t := time.NewTicker(a.cfg.StatusInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
				n, err := a.client.CoreV1().Nodes().Get(ctx, a.cfg.NodeName, metav1.GetOptions{})
				if err != nil {
					return err
				}
				n.Status = a.nodeStatus(metav1.Now(), n.Status.Conditions)
				_, err = a.client.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
				return err
			})
			if err != nil && ctx.Err() == nil {
				a.log.Warn("node status", "err", err)
			}
		}
	}
}

// nodeIPs are the node's InternalIPs, primary first.
func (a *Agent) nodeIPs() []netip.Addr {
	var out []netip.Addr
	for _, ip := range []netip.Addr{a.cfg.NodeIP, a.cfg.SecondaryNodeIP} {
		if ip.IsValid() {
			out = append(out, ip)
		}
	}
	return out
}
