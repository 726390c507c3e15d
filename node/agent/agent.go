// Package agent is svcnet's node agent (the kubelet's role): it registers
// its Node, keeps the node's Lease in kube-node-lease renewed, and runs the
// pods bound to it (spec.nodeName) through a Runtime, reporting their status
// the way the kubelet does and completing their graceful deletion.
//
// Per pod, one worker sets up the pod's volumes (volumes.go), creates the
// sandbox (network namespace, address, resolv.conf, hosts, hostname, the
// volumes' bind mounts), admits the pod's hostPorts (a port held by
// another pod fails the pod), runs the init containers one at a time to
// completion (sidecars, restartPolicy Always, kept running; see
// initcontainers.go), then starts each app container, all with the
// kubelet's environment (Service variables computed from the Services that
// exist at that start), restarts containers per restartPolicy with the kubelet's
// back-off (immediately, then 10s doubling to 5m, reset after 10 minutes of
// running), runs probes, and writes status whenever it changes. When the pod
// gets a deletionTimestamp, the worker sends SIGTERM, waits up to the
// deletion grace period, sends SIGKILL, removes the sandbox and deletes the
// pod with gracePeriodSeconds=0.
package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/svcnet/svcnet/node/dnsconfig"
	"github.com/svcnet/svcnet/node/hostport"
)

// Config is the node agent's configuration.
type Config struct {
	NodeName string
	NodeIP   netip.Addr
	// PodCIDR is the node's pod range; it is written to the Node's spec.
	PodCIDR netip.Prefix
	// SecondaryNodeIP and SecondaryPodCIDR make a dual-stack node: a second
	// InternalIP and pod range of the other family (pods get an address of
	// each family, the primary one first).
	SecondaryNodeIP  netip.Addr
	SecondaryPodCIDR netip.Prefix
	// ClusterDNS and ClusterDomain feed ClusterFirst pods' resolv.conf.
	ClusterDNS    []string
	ClusterDomain string
	// HostResolvConf is the node's resolv.conf, for Default pods and host
	// search domains ("/etc/resolv.conf").
	HostResolvConf string
	// DataDir holds per-pod state and logs.
	DataDir string
	// Labels are added to the Node's own labels.
	Labels map[string]string
	// Taints are set when the Node is first registered.
	Taints []v1.Taint
	// Builtin is the command prefix that runs a built-in image server
	// (e.g. ["/usr/local/bin/svcnet", "builtin"]).
	Builtin []string
	// LeaseInterval is how often the Lease is renewed (10s); StatusInterval
	// how often the Node status heartbeat is written (1m).
	LeaseInterval, StatusInterval time.Duration
	// BackoffBase is the first crash back-off (10s), BackoffMax the cap (5m).
	BackoffBase, BackoffMax time.Duration
	// StaticPodPath is the directory of static pod manifests (the kubelet's
	// --pod-manifest-path); empty: none.
	StaticPodPath string
	Logger        *slog.Logger
}

// Agent runs one node.
type Agent struct {
	cfg      Config
	client   kubernetes.Interface
	runtime  Runtime
	hostPort *hostport.Manager
	log      *slog.Logger

	services corelisters.ServiceLister
	dns      dnsconfig.Cluster

	mu      sync.Mutex
	workers map[types.UID]*podWorker
	wg      sync.WaitGroup
	// static are the running static pods by namespace/name; staticLoaded
	// is set once the manifests were first read; staticErrs are the
	// manifest errors already logged.
	static       map[string]*podWorker
	staticLoaded bool
	staticErrs   map[string]bool
}

// New returns an agent. hostPorts may be nil when hostPort mapping is not
// available (pods asking for one then fail admission).
func New(cfg Config, client kubernetes.Interface, rt Runtime, hostPorts *hostport.Manager) (*Agent, error) {
	if cfg.NodeName == "" {
		return nil, errors.New("node agent: node name is required")
	}
	if cfg.ClusterDomain == "" {
		cfg.ClusterDomain = "cluster.local"
	}
	if cfg.LeaseInterval == 0 {
		cfg.LeaseInterval = 10 * time.Second
	}
	if cfg.StatusInterval == 0 {
		cfg.StatusInterval = time.Minute
	}
	if cfg.BackoffBase == 0 {
		cfg.BackoffBase = 10 * time.Second
	}
	if cfg.BackoffMax == 0 {
		cfg.BackoffMax = 5 * time.Minute
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	a := &Agent{cfg: cfg, client: client, runtime: rt, hostPort: hostPorts, log: cfg.Logger.With("node", cfg.NodeName), workers: map[types.UID]*podWorker{},
		static: map[string]*podWorker{}, staticErrs: map[string]bool{}}
	a.dns = dnsconfig.Cluster{Servers: cfg.ClusterDNS, Domain: cfg.ClusterDomain}
	if cfg.HostResolvConf != "" {
		if f, err := os.Open(cfg.HostResolvConf); err == nil {
			a.dns.Host, err = dnsconfig.ParseResolvConf(f)
			f.Close()
			if err != nil {
				return nil, err
			}
		}
	}
	return a, nil
}

// Run registers the node and runs until ctx ends. On return, every pod
// process this agent started has been stopped (their sandboxes are kept
// out of the API's view: the pods stay bound to this node).
func (a *Agent) Run(ctx context.Context) error {
	if err := a.registerNode(ctx); err != nil {
		return err
	}
	a.wg.Add(2)
	go func() { defer a.wg.Done(); a.leaseLoop(ctx) }()
	go func() { defer a.wg.Done(); a.statusLoop(ctx) }()

	svcFactory := informers.NewSharedInformerFactory(a.client, 0)
	a.services = svcFactory.Core().V1().Services().Lister()
	podFactory := informers.NewSharedInformerFactoryWithOptions(a.client, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", a.cfg.NodeName).String()
	}))
	podInf := podFactory.Core().V1().Pods().Informer()
	reg, err := podInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o interface{}) { a.podChanged(ctx, o) },
		UpdateFunc: func(_, o interface{}) { a.podChanged(ctx, o) },
		DeleteFunc: func(o interface{}) { a.podGone(o) },
	})
	if err != nil {
		return fmt.Errorf("watch pods: %w", err)
	}
	svcFactory.Start(ctx.Done())
	svcFactory.WaitForCacheSync(ctx.Done())
	podFactory.Start(ctx.Done())
	synced := cache.WaitForCacheSync(ctx.Done(), reg.HasSynced)
	if ad, ok := a.runtime.(Adopter); ok && synced {
		// Sandboxes an earlier agent left (it crashed) belong to pods this
		// one adopts (the API's pods and the static pods); once every pod
		// of the initial list has its worker, the others (pods deleted
		// meanwhile) go.
		mine := map[string]bool{}
		for _, o := range podInf.GetStore().List() {
			if p, ok := o.(*v1.Pod); ok {
				mine[string(p.UID)] = true
			}
		}
		if a.cfg.StaticPodPath != "" {
			statics, _ := readStaticPods(a.cfg.StaticPodPath, a.cfg.NodeName)
			for _, p := range statics {
				mine[string(p.UID)] = true
			}
		}
		n, err := ad.CleanupExcept(ctx, func(uid string) bool { return mine[uid] })
		if n > 0 || err != nil {
			a.log.Info("removed sandboxes of an earlier run", "count", n, "err", err)
		}
	}
	if a.cfg.StaticPodPath != "" && synced {
		a.syncStaticPods(ctx)
		a.mu.Lock()
		a.staticLoaded = true
		a.mu.Unlock()
		// Mirror pods of the initial list that no static pod claims.
		for _, o := range podInf.GetStore().List() {
			if p, ok := o.(*v1.Pod); ok && p.Annotations[v1.MirrorPodAnnotationKey] != "" {
				a.mirrorChanged(ctx, p)
			}
		}
		a.wg.Add(1)
		go func() {
			defer a.wg.Done()
			wait.UntilWithContext(ctx, a.syncStaticPods, StaticPodInterval)
		}()
	}
	<-ctx.Done()
	podFactory.Shutdown()
	svcFactory.Shutdown()
	a.mu.Lock()
	for _, w := range a.workers {
		w.shutdown()
	}
	a.mu.Unlock()
	a.wg.Wait()
	return nil
}

func (a *Agent) podChanged(ctx context.Context, o interface{}) {
	pod, ok := o.(*v1.Pod)
	if !ok || pod.Spec.NodeName != a.cfg.NodeName {
		return
	}
	if _, mirror := pod.Annotations[v1.MirrorPodAnnotationKey]; mirror {
		a.mirrorChanged(ctx, pod) // the API's view of a static pod, which runs from its manifest
		return
	}
	if _, ok := a.runtime.(HostRuntime); pod.Spec.HostNetwork && !ok {
		return // this runtime has no host-network pods
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	w, ok := a.workers[pod.UID]
	if !ok {
		if pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed {
			if pod.DeletionTimestamp != nil {
				go a.deletePod(ctx, pod)
			}
			return
		}
		a.startWorker(ctx, pod, false, nil)
		return
	}
	w.update(pod)
}

// startWorker starts the worker of pod (a static pod's when static), after
// prev, if any, has finished. a.mu must be held.
func (a *Agent) startWorker(ctx context.Context, pod *v1.Pod, static bool, prev *podWorker) *podWorker {
	w := newPodWorker(a, pod)
	w.static = static
	a.workers[pod.UID] = w
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		defer close(w.done)
		if prev != nil {
			<-prev.done
		}
		w.run(ctx)
		a.mu.Lock()
		delete(a.workers, pod.UID)
		a.mu.Unlock()
	}()
	return w
}

func (a *Agent) podGone(o interface{}) {
	if t, ok := o.(cache.DeletedFinalStateUnknown); ok {
		o = t.Obj
	}
	pod, ok := o.(*v1.Pod)
	if !ok {
		return
	}
	if _, mirror := pod.Annotations[v1.MirrorPodAnnotationKey]; mirror {
		a.mirrorGone(pod)
		return
	}
	a.mu.Lock()
	w := a.workers[pod.UID]
	a.mu.Unlock()
	if w != nil {
		w.forceKill()
	}
}

// deletePod finishes graceful deletion: delete with grace 0, only this UID.
func (a *Agent) deletePod(ctx context.Context, pod *v1.Pod) {
	zero := int64(0)
	uid := pod.UID
	err := a.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: &zero,
		Preconditions:      &metav1.Preconditions{UID: &uid},
	})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		a.log.Error("delete pod", "pod", pod.Namespace+"/"+pod.Name, "err", err)
	}
}

// event records an Event about pod as the kubelet of this node does (its
// FailedMount, for one); a failure is only logged.
func (a *Agent) event(pod *v1.Pod, eventType, reason, message string) {
	now := metav1.Now()
	ev := &v1.Event{
		ObjectMeta:          metav1.ObjectMeta{Name: fmt.Sprintf("%s.%x", pod.Name, now.UnixNano()), Namespace: pod.Namespace},
		InvolvedObject:      v1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID},
		Type:                eventType,
		Reason:              reason,
		Message:             message,
		Source:              v1.EventSource{Component: "kubelet", Host: a.cfg.NodeName},
		FirstTimestamp:      now,
		LastTimestamp:       now,
		Count:               1,
		ReportingController: "kubelet",
		ReportingInstance:   a.cfg.NodeName,
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := a.client.CoreV1().Events(pod.Namespace).Create(ctx, ev, metav1.CreateOptions{}); err != nil {
		a.log.Warn("record event", "pod", pod.Namespace+"/"+pod.Name, "reason", reason, "err", err)
	}
}

// servicesNow lists the Services known at this moment.
func (a *Agent) servicesNow() []*v1.Service {
	if a.services == nil {
		return nil
	}
	s, _ := a.services.List(labels.Everything())
	return s
}

// PodDir is where a pod's files and logs live on this node.
func (a *Agent) PodDir(namespace, name string) string {
	return filepath.Join(a.cfg.DataDir, "pods", namespace+"_"+name)
}
