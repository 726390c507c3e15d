package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"

	"github.com/svcnet/svcnet/node/dnsconfig"
	"github.com/svcnet/svcnet/node/hostport"
	"github.com/svcnet/svcnet/node/images"
	"github.com/svcnet/svcnet/node/podstatus"
	"github.com/svcnet/svcnet/node/probe"
	"github.com/svcnet/svcnet/node/sandbox"
)

// RuntimeScheme prefixes container IDs in container statuses.
const RuntimeScheme = "svcnet://"

type podWorker struct {
	a   *Agent
	key string
	// Identity of the pod, fixed for the worker's life (pod is replaced).
	namespace, name string
	uid             types.UID

	mu           sync.Mutex
	pod          *v1.Pod
	sb           PodSandbox
	containers   map[string]*podstatus.Container
	sandboxReady bool
	adopted      bool // the sandbox is an earlier agent's
	failReason   string
	failMessage  string
	startTime    time.Time
	lastWritten  *v1.PodStatus
	// vols sets up the pod's volumes and refreshes its tokens (setup
	// makes it); lastMountEvent is the FailedMount message last recorded.
	vols           *podVolumes
	lastMountEvent string

	dirty chan struct{}
	// dirtyAt is when the oldest change not yet written happened: the
	// status is computed "as of" that moment, so a condition's transition
	// time (and the precise Ready time, podstatus.ReadyTransitionAnnotation)
	// is when the agent saw the change, not when the write got its turn.
	dirtyMu   sync.Mutex
	dirtyAt   time.Time
	term      chan struct{} // closed on deletion request
	termOnce  sync.Once
	grace     time.Duration
	termAt    time.Time     // when termination began
	stopped   chan struct{} // closed when containers must stop now
	stopOnce  sync.Once
	deleteAPI bool // delete the pod object when done
	// static: the pod runs from a manifest (its UID is the manifest's
	// hash); its status goes to its mirror pod, which removeMirror asks to
	// delete when the worker ends (the manifest is gone).
	static       bool
	removeMirror bool
	done         chan struct{} // closed when the worker has ended
}

func newPodWorker(a *Agent, pod *v1.Pod) *podWorker {
	w := &podWorker{
		a: a, key: pod.Namespace + "/" + pod.Name, pod: pod.DeepCopy(),
		namespace: pod.Namespace, name: pod.Name, uid: pod.UID,
		containers: map[string]*podstatus.Container{},
		dirty:      make(chan struct{}, 1), term: make(chan struct{}), stopped: make(chan struct{}),
		done: make(chan struct{}),
	}
	w.update(pod)
	return w
}

// update takes a newer version of the pod; a deletionTimestamp starts
// graceful termination.
func (w *podWorker) update(pod *v1.Pod) {
	w.mu.Lock()
	w.pod = pod.DeepCopy()
	w.mu.Unlock()
	if pod.DeletionTimestamp != nil {
		grace := 30 * time.Second
		if pod.Spec.TerminationGracePeriodSeconds != nil {
			grace = time.Duration(*pod.Spec.TerminationGracePeriodSeconds) * time.Second
		}
		if pod.DeletionGracePeriodSeconds != nil {
			grace = time.Duration(*pod.DeletionGracePeriodSeconds) * time.Second
		}
		w.terminate(grace, true)
	}
}

func (w *podWorker) terminate(grace time.Duration, deleteAPI bool) {
	w.termOnce.Do(func() {
		w.mu.Lock()
		w.grace, w.deleteAPI, w.termAt = grace, deleteAPI, time.Now()
		w.mu.Unlock()
		close(w.term)
	})
}

// forceKill is used when the pod object is gone: stop at once.
func (w *podWorker) forceKill() { w.terminate(0, false) }

// shutdown stops the pod because the agent is stopping.
func (w *podWorker) shutdown() { w.terminate(2*time.Second, false) }

func (w *podWorker) markDirty() {
	w.dirtyMu.Lock()
	if w.dirtyAt.IsZero() {
		w.dirtyAt = time.Now()
	}
	w.dirtyMu.Unlock()
	select {
	case w.dirty <- struct{}{}:
	default:
	}
}

func (w *podWorker) log() func(msg string, args ...any) {
	return func(msg string, args ...any) { w.a.log.Info(msg, append([]any{"pod", w.key}, args...)...) }
}

// containerID names a container instance: derived from the pod UID, the
// container and its restart number, so that an agent that adopts the
// instance after a restart reports the same ID.
func containerID(uid types.UID, name string, restart int) string {
	h := sha256.Sum256([]byte(fmt.Sprintf("%s/%s/%d", uid, name, restart)))
	return hex.EncodeToString(h[:16])
}

func (w *podWorker) run(ctx context.Context) {
	w.mu.Lock()
	w.startTime = time.Now()
	pod := w.pod.DeepCopy()
	w.mu.Unlock()

	statusDone := make(chan struct{})
	statusCtx, stopStatus := context.WithCancel(context.Background())
	go func() { defer close(statusDone); w.statusLoop(statusCtx) }()
	w.markDirty()

	var wg sync.WaitGroup
	// The tokens are refreshed while containers run: until they have all
	// stopped, and before the sandbox (with the files) goes.
	refreshCtx, stopRefresh := context.WithCancel(ctx)
	defer stopRefresh()
	refreshDone := make(chan struct{})
	var syncDone chan struct{} // nil: no volume content sync runs
	if err := w.setup(ctx, pod); err != nil {
		w.log()("pod setup failed", "err", err)
		close(refreshDone)
	} else {
		go func() { defer close(refreshDone); w.vols.refreshTokens(refreshCtx) }()
		w.mu.Lock()
		sb := w.sb
		w.mu.Unlock()
		if sb != nil {
			syncDone = make(chan struct{})
			go func() {
				defer close(syncDone)
				w.vols.syncContents(refreshCtx, sb.Dir(), sb.IP(), func() *v1.Pod {
					w.mu.Lock()
					defer w.mu.Unlock()
					return w.pod.DeepCopy()
				})
			}()
		}
		wg.Add(1)
		go func() { defer wg.Done(); w.runContainers(ctx) }()
	}

	select {
	case <-w.term:
	case <-ctx.Done():
		w.shutdown()
	}
	w.stopOnce.Do(func() { close(w.stopped) })
	wg.Wait()
	stopRefresh()
	<-refreshDone
	if syncDone != nil {
		<-syncDone
	}
	w.mu.Lock()
	sb := w.sb
	deleteAPI := w.deleteAPI
	w.mu.Unlock()
	if w.a.hostPort != nil {
		_ = w.a.hostPort.Remove(context.Background(), w.key)
	}
	if sb != nil {
		if err := sb.Destroy(context.Background()); err != nil {
			w.a.log.Warn("destroy sandbox", "pod", w.key, "err", err)
		}
	}
	if deleteAPI {
		// Report the final container states, then finish the deletion.
		w.markDirty()
		time.Sleep(50 * time.Millisecond)
	}
	stopStatus()
	<-statusDone
	w.mu.Lock()
	removeMirror := w.static && w.removeMirror
	w.mu.Unlock()
	if removeMirror {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		w.a.deleteMirror(ctx, pod)
		cancel()
	}
	if deleteAPI {
		w.mu.Lock()
		p := w.pod.DeepCopy()
		w.mu.Unlock()
		w.a.deletePod(context.Background(), p)
		w.log()("pod deleted")
	}
}

// setup sets up the pod's volumes, creates the sandbox and admits
// hostPorts. A failure is recorded in the status (Failed for admission
// errors, ContainerCreating with an error otherwise: a volume that cannot
// be set up also gets a FailedMount event, as from the kubelet).
func (w *podWorker) setup(ctx context.Context, pod *v1.Pod) error {
	host, domain := dnsconfig.Hostname(pod, w.a.cfg.ClusterDomain)
	resolv := dnsconfig.ForPod(pod, w.a.dns).ResolvConf()
	nginx := false
	for _, c := range allContainers(pod) {
		if b := images.Lookup(c.Image); b != nil && b.Name == "nginx" {
			nginx = true
		}
	}
	hostIP := ""
	if w.a.cfg.NodeIP.IsValid() {
		hostIP = w.a.cfg.NodeIP.String()
	}
	w.vols = newPodVolumes(w.a.client, pod, hostIP, w.a.log)
	var sb PodSandbox
	var err error
	if ad, ok := w.a.runtime.(Adopter); ok {
		if sb, err = ad.AdoptPodSandbox(string(pod.UID), pod.Namespace, pod.Name); err == nil {
			w.log()("adopted the running sandbox of an earlier agent", "ip", sb.IP())
			w.mu.Lock()
			w.adopted = true
			if pod.Status.StartTime != nil {
				w.startTime = pod.Status.StartTime.Time
			}
			w.mu.Unlock()
			// The volumes are mounted already; writing them again gets
			// fresh tokens (the earlier agent's refresh times are gone with
			// it), and the refresher takes over from there. What fails is
			// tried again by the refresher (tokens) or left as it was.
			if _, err := w.vols.setUp(ctx, sb.Dir(), sb.IP()); err != nil {
				w.a.log.Warn("volumes of an adopted pod", "pod", w.key, "err", err)
			}
		}
	}
	for attempt := 0; sb == nil; attempt++ {
		if hr, ok := w.a.runtime.(HostRuntime); ok && pod.Spec.HostNetwork {
			sb, err = hr.RunHostSandbox(ctx, string(pod.UID), pod.Namespace, pod.Name, w.a.nodeIPs(), func(ip netip.Addr, dir string) (sandbox.Spec, error) {
				mounts, err := w.vols.setUp(ctx, dir, ip)
				if err != nil {
					return sandbox.Spec{}, err
				}
				// The pod's own UTS namespace carries the node's name, the
				// hostname a host-network pod has (and its HOSTNAME).
				return sandbox.Spec{Hostname: nodeHostname(w.a.cfg.NodeName), Mounts: mounts}, nil
			})
		} else {
			sb, err = w.a.runtime.RunPodSandbox(ctx, string(pod.UID), pod.Namespace, pod.Name, func(ip netip.Addr, dir string) (sandbox.Spec, error) {
				mounts, err := w.vols.setUp(ctx, dir, ip)
				if err != nil {
					return sandbox.Spec{}, err
				}
				s := sandbox.Spec{Hostname: host, ResolvConf: resolv, Hosts: dnsconfig.Hosts([]string{ip.String()}, host, domain, pod.Spec.HostAliases),
					Mounts: mounts}
				if nginx {
					s.NginxFiles = images.NginxDefaultFiles()
				}
				return s, nil
			})
		}
		if err == nil {
			break
		}
		msg := "failed to create pod sandbox: " + err.Error()
		if me := (*mountError)(nil); errors.As(err, &me) {
			// The kubelet's pod waits in ContainerCreating; kubectl
			// describe shows why in the FailedMount event.
			msg = strings.ReplaceAll(err.Error(), "\n", "; ")
			if msg != w.lastMountEvent {
				w.lastMountEvent = msg
				w.a.event(pod, v1.EventTypeWarning, "FailedMount", msg)
			}
		}
		reason := "ContainerCreating"
		if len(pod.Spec.InitContainers) > 0 {
			reason = "PodInitializing"
		}
		w.mu.Lock()
		for _, c := range allContainers(pod) {
			w.containers[c.Name] = &podstatus.Container{Name: c.Name, WaitingReason: reason, WaitingMessage: msg}
		}
		w.mu.Unlock()
		w.markDirty()
		select {
		case <-w.term:
			return err
		case <-ctx.Done():
			return err
		case <-time.After(time.Duration(min(attempt+1, 10)) * time.Second):
		}
	}
	w.mu.Lock()
	w.sb = sb
	w.sandboxReady = true
	// The sandbox's errors are over; no container has started yet.
	clear(w.containers)
	w.mu.Unlock()
	// A host-network pod's ports are the node's own: nothing to map.
	if maps := hostport.FromPod(pod, sb.IP()); len(maps) > 0 && !pod.Spec.HostNetwork {
		var err error
		if w.a.hostPort == nil {
			err = errors.New("hostPort mapping is not available on this node")
		} else {
			err = w.a.hostPort.Add(ctx, w.key, maps)
		}
		if err != nil {
			w.mu.Lock()
			w.failReason = "NodePorts"
			w.failMessage = "Pod was rejected: node(s) didn't have free ports for the requested pod ports: " + err.Error()
			w.mu.Unlock()
			w.markDirty()
			return err
		}
	}
	w.markDirty()
	return nil
}

// nodeHostname is the hostname of a host-network pod: the node's name,
// cut to the 63 characters a hostname may have, as the kubelet cuts a pod's.
func nodeHostname(node string) string {
	if len(node) <= 63 {
		return node
	}
	return strings.TrimRight(node[:63], "-.")
}

func (w *podWorker) setContainer(name string, f func(c *podstatus.Container)) {
	w.mu.Lock()
	c := w.containers[name]
	if c == nil {
		c = &podstatus.Container{Name: name}
		w.containers[name] = c
	}
	f(c)
	w.mu.Unlock()
	w.markDirty()
}

// wait returns false when the pod is stopping.
func (w *podWorker) wait(ctx context.Context, d time.Duration) bool {
	return w.waitOr(ctx, d, nil)
}

// waitOr is wait that also ends (false) when stop is closed.
func (w *podWorker) waitOr(ctx context.Context, d time.Duration, stop <-chan struct{}) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-w.stopped:
	case <-w.term:
	case <-stop:
	case <-ctx.Done():
	}
	return false
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// podStopping tells whether the pod's containers are being stopped.
func (w *podWorker) podStopping() bool {
	select {
	case <-w.stopped:
		return true
	case <-w.term:
		return true
	default:
		return false
	}
}

func (w *podWorker) stopGrace() time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.grace
}

func (w *podWorker) containerLoop(ctx context.Context, spec v1.Container, o loopOpts) bool {
	name := spec.Name
	w.mu.Lock()
	pod := w.pod.DeepCopy()
	sb := w.sb
	w.mu.Unlock()
	policy := pod.Spec.RestartPolicy
	if policy == "" {
		policy = v1.RestartPolicyAlways
	}
	var startedOnce sync.Once
	markStarted := func() {
		if o.started != nil {
			startedOnce.Do(func() { close(o.started) })
		}
	}
	// A sidecar stops when told to (after the app containers); the others
	// when the pod stops.
	stoppedC, termC := w.stopped, w.term
	if o.role == sidecarRole {
		stoppedC, termC = nil, nil
	}
	var delay time.Duration
	adopted, restarts, adoptedReady := w.adoptContainer(spec, sb)
	for {
		var proc Container
		var env []string
		if adopted != nil {
			proc, adopted = adopted, nil
			b, _ := os.ReadFile(filepath.Join(sb.Dir(), "env", name))
			env = strings.Split(string(b), "\x00")
		} else {
			var ok bool
			if proc, env, ok = w.startContainer(ctx, spec, pod, sb, restarts, &delay, o.stop); !ok {
				return false
			} else if proc == nil {
				continue
			}
			adoptedReady = false
		}
		id := containerID(w.uid, name, restarts)
		w.setContainer(name, func(c *podstatus.Container) {
			if c.Terminated != nil {
				c.LastTermination = c.Terminated
			}
			c.ID, c.Running, c.StartedAt, c.Terminated = id, true, proc.StartedAt(), nil
			c.WaitingReason, c.WaitingMessage = "", ""
			c.RestartCount = int32(restarts)
			c.Ready = ((spec.ReadinessProbe == nil && spec.StartupProbe == nil) || adoptedReady) && o.role != initRole
			c.Started = spec.StartupProbe == nil || adoptedReady
		})
		if spec.StartupProbe == nil || adoptedReady {
			markStarted()
		}
		pctx, cancelProbes := context.WithCancel(ctx)
		if o.role != initRole {
			// Regular init containers have no probes (the API refuses them).
			go w.probeLoop(pctx, spec, sb, proc, env, id, markStarted)
		}
		stopping := false
		select {
		case <-proc.Done():
		case <-stoppedC:
			stopping = true
		case <-termC:
			stopping = true
		case <-o.stop:
			stopping = true
		}
		cancelProbes()
		if stopping {
			grace := w.stopGrace()
			if o.role == sidecarRole {
				grace = w.sidecarGrace(pod)
			}
			if w.deleting() {
				grace = w.preStop(spec, sb, proc, env, grace)
			}
			proc.Stop(grace)
		}
		code, sig, fin := proc.Exit()
		term := &podstatus.Termination{ExitCode: int32(code), Signal: int32(sig), StartedAt: proc.StartedAt(), FinishedAt: fin}
		var restart bool
		switch o.role {
		case appRole:
			restart = policy == v1.RestartPolicyAlways || (policy == v1.RestartPolicyOnFailure && code != 0)
		case initRole:
			// Run to completion: a failure is retried unless the pod's
			// policy is Never (the pod fails then).
			restart = code != 0 && policy != v1.RestartPolicyNever
		case sidecarRole:
			// Whatever the pod's policy, until the pod stops.
			restart = !w.podStopping() && !isClosed(o.stop)
		}
		if stopping || !restart {
			w.setContainer(name, func(c *podstatus.Container) {
				c.Running, c.Ready, c.Started, c.Terminated = false, false, false, term
			})
			if o.role == appRole && !stopping {
				if o.finished != nil {
					o.finished <- struct{}{}
				}
				w.wait(ctx, 1<<62)
			}
			return !stopping && code == 0
		}
		if fin.Sub(proc.StartedAt()) >= 10*time.Minute {
			delay = 0
		}
		w.setContainer(name, func(c *podstatus.Container) {
			c.Running, c.Ready, c.Started = false, false, false
			switch {
			case delay > 0:
				c.LastTermination = term
				c.WaitingReason = "CrashLoopBackOff"
				c.WaitingMessage = fmt.Sprintf("back-off %s restarting failed container=%s pod=%s_%s(%s)", delay, name, pod.Name, pod.Namespace, pod.UID)
			case o.role != appRole:
				// As the kubelet shows it until the next instance runs
				// (Init:Error in kubectl's STATUS).
				c.Terminated = term
			default:
				c.LastTermination = term
				c.WaitingReason, c.WaitingMessage = "ContainerCreating", ""
			}
		})
		if delay > 0 && !w.waitOr(ctx, delay, o.stop) {
			w.setContainer(name, func(c *podstatus.Container) { c.Terminated = term })
			return false
		}
		restarts++
		delay = w.nextDelay(delay)
	}
}

// startContainer starts instance restarts of the container. It returns
// ok=false when the pod is stopping (or the container cannot ever start),
// and a nil Container when the caller should try again (after a wait it
// has done).
func (w *podWorker) startContainer(ctx context.Context, spec v1.Container, pod *v1.Pod, sb PodSandbox, restarts int, delay *time.Duration, stop <-chan struct{}) (Container, []string, bool) {
	name := spec.Name
	plan, err := images.Resolve(&spec)
	if err != nil {
		w.setContainer(name, func(c *podstatus.Container) { setWaiting(c, images.Reason, err.Error()) })
		w.waitOr(ctx, 1<<62, stop)
		return nil, nil, false
	}
	host, _ := dnsconfig.Hostname(pod, w.a.cfg.ClusterDomain)
	if pod.Spec.HostNetwork {
		host = w.a.cfg.NodeName // the node's hostname, as the kubelet gives it
	}
	env, lookup, err := containerEnv(ctx, envInput{pod: pod, c: &spec, services: w.a.servicesNow(), hostname: host,
		podIP: sb.IP().String(), hostIP: w.a.cfg.NodeIP.String(), client: w.a.client})
	if err != nil {
		w.setContainer(name, func(c *podstatus.Container) { setWaiting(c, "CreateContainerConfigError", err.Error()) })
		return nil, nil, w.waitOr(ctx, 5*time.Second, stop)
	}
	var argv []string
	if plan.Builtin != nil {
		argv = append(append([]string(nil), w.a.cfg.Builtin...), plan.Builtin.Args...)
	} else {
		for _, s := range plan.Argv {
			argv = append(argv, Expand(s, lookup))
		}
	}
	_ = os.MkdirAll(filepath.Join(sb.Dir(), "env"), 0o755)
	_ = os.WriteFile(filepath.Join(sb.Dir(), "env", name), []byte(strings.Join(env, "\x00")), 0o600)
	proc, err := sb.StartContainer(argv, env, spec.WorkingDir, sandbox.LogPath(sb.Dir(), name, restarts))
	if err != nil {
		w.setContainer(name, func(c *podstatus.Container) { setWaiting(c, "RunContainerError", err.Error()) })
		if !w.waitOr(ctx, max(*delay, time.Second), stop) {
			return nil, nil, false
		}
		*delay = w.nextDelay(*delay)
		return nil, nil, true
	}
	return proc, env, true
}

// setWaiting makes the container wait for the reason (a terminated instance
// becomes the last termination).
func setWaiting(c *podstatus.Container, reason, msg string) {
	if c.Terminated != nil {
		c.LastTermination, c.Terminated = c.Terminated, nil
	}
	c.Running, c.WaitingReason, c.WaitingMessage = false, reason, msg
}

// adoptContainer takes over the newest instance of the container an
// earlier agent started in an adopted sandbox, if it still runs: its
// restart count, and its readiness as the pod's status last reported it
// (the kubelet also keeps a running container's readiness across its
// restarts), so that the pod stays an endpoint. When the newest instance
// has ended, the restart number of the next one is returned (its log and
// ID are new).
func (w *podWorker) adoptContainer(spec v1.Container, sb PodSandbox) (Container, int, bool) {
	w.mu.Lock()
	adopted := w.adopted
	pod := w.pod.DeepCopy()
	w.mu.Unlock()
	ca, ok := sb.(ContainerAdopter)
	if !adopted {
		return nil, 0, false
	}
	last := lastInstance(sb.Dir(), spec.Name)
	if last < 0 {
		return nil, 0, false
	}
	if !ok {
		return nil, last + 1, false
	}
	proc, err := ca.AdoptContainer(sandbox.LogPath(sb.Dir(), spec.Name, last))
	if err != nil {
		return nil, last + 1, false
	}
	ready := false
	for _, cs := range append(append([]v1.ContainerStatus(nil), pod.Status.InitContainerStatuses...), pod.Status.ContainerStatuses...) {
		if cs.Name == spec.Name && cs.ContainerID == RuntimeScheme+containerID(w.uid, spec.Name, last) {
			ready = cs.Ready
		}
	}
	w.log()("adopted a running container", "container", spec.Name, "restartCount", last, "ready", ready)
	return proc, last, ready
}

// lastInstance is the restart number of the container's newest instance
// in the pod directory dir (the newest log), -1 if it never started.
func lastInstance(dir, name string) int {
	logs, _ := filepath.Glob(filepath.Join(dir, "logs", name, "*.log"))
	last := -1
	for _, l := range logs {
		if n, err := strconv.Atoi(strings.TrimSuffix(filepath.Base(l), ".log")); err == nil && n > last {
			last = n
		}
	}
	return last
}

// deleting tells whether the pod stops because it is being deleted (not
// because the agent stops or the pod object is gone).
func (w *podWorker) deleting() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.deleteAPI && w.grace > 0
}

// preStop runs the container's preStop hook (exec, httpGet or sleep) before
// the SIGTERM, as the kubelet does: the hook counts against the grace
// period, and whatever it leaves (at least 2 s, the kubelet's minimum
// after a hook) is the grace of the SIGTERM. A failing hook is logged and
// the container is stopped anyway. A container that exits during the hook
// ends it.
func (w *podWorker) preStop(spec v1.Container, sb PodSandbox, proc Container, env []string, grace time.Duration) time.Duration {
	if spec.Lifecycle == nil || spec.Lifecycle.PreStop == nil {
		return grace
	}
	h := spec.Lifecycle.PreStop
	t0 := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	go func() {
		select {
		case <-proc.Done():
			cancel()
		case <-ctx.Done():
		}
	}()
	var err error
	switch {
	case h.Exec != nil:
		var code int
		code, err = sb.Exec(ctx, h.Exec.Command, env)
		if err == nil && code != 0 {
			err = fmt.Errorf("command %q exited with %d", h.Exec.Command, code)
		}
	case h.HTTPGet != nil:
		target := probe.Target{PodIP: sb.IP().String(), Ports: spec.Ports}
		if r, msg := probe.Run(ctx, &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: h.HTTPGet}}, grace, target); r != probe.Success {
			err = errors.New(msg)
		}
	case h.Sleep != nil:
		select {
		case <-time.After(time.Duration(h.Sleep.Seconds) * time.Second):
		case <-ctx.Done():
		}
	}
	if err != nil && ctx.Err() == nil {
		w.a.log.Warn("preStop hook failed", "pod", w.key, "container", spec.Name, "err", err)
	}
	return max(grace-time.Since(t0), 2*time.Second)
}

func (w *podWorker) nextDelay(d time.Duration) time.Duration {
	if d == 0 {
		return w.a.cfg.BackoffBase
	}
	return min(2*d, w.a.cfg.BackoffMax)
}

// probeLoop runs the container instance's probes. A startup probe gates
// the others; a liveness or startup failure kills the instance.
func (w *podWorker) probeLoop(ctx context.Context, spec v1.Container, sb PodSandbox, proc Container, env []string, id string, onStarted func()) {
	w.mu.Lock()
	grace := graceOf(w.pod)
	w.mu.Unlock()
	started := make(chan struct{})
	if spec.StartupProbe == nil {
		close(started)
	}
	target := probe.Target{PodIP: sb.IP().String(), Ports: spec.Ports,
		Exec: func(ctx context.Context, cmd []string) (int, error) { return sb.Exec(ctx, cmd, env) }}
	setIfCurrent := func(f func(c *podstatus.Container)) {
		w.setContainer(spec.Name, func(c *podstatus.Container) {
			if c.ID == id && c.Running {
				f(c)
			}
		})
	}
	run := func(kind probe.Kind, p *v1.Probe, onResult func(probe.Result)) {
		s := probe.SpecOf(kind, p)
		wk := probe.NewWorker(kind, s, proc.StartedAt())
		if kind != probe.Startup {
			select {
			case <-started:
			case <-ctx.Done():
				return
			}
		}
		for {
			if wk.ShouldProbe(time.Now()) {
				r, msg := probe.Run(ctx, p, s.Timeout, target)
				if ctx.Err() != nil {
					return
				}
				if r == probe.Failure && msg != "" {
					w.a.log.Debug("probe failed", "pod", w.key, "container", spec.Name, "probe", kind.String(), "msg", msg)
				}
				if res, changed := wk.Observe(r); changed {
					onResult(res)
				}
			}
			wait := s.Period
			if d := time.Until(proc.StartedAt().Add(s.InitialDelay)); d > 0 && d < wait {
				wait = d
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
		}
	}
	if p := spec.StartupProbe; p != nil {
		go run(probe.Startup, p, func(r probe.Result) {
			switch r {
			case probe.Success:
				setIfCurrent(func(c *podstatus.Container) {
					c.Started = true
					if spec.ReadinessProbe == nil {
						c.Ready = true
					}
				})
				close(started)
				onStarted()
			case probe.Failure:
				go proc.Stop(grace)
			}
		})
	}
	if p := spec.LivenessProbe; p != nil {
		go run(probe.Liveness, p, func(r probe.Result) {
			if r == probe.Failure {
				w.a.log.Info("liveness probe failed, restarting container", "pod", w.key, "container", spec.Name)
				go proc.Stop(grace)
			}
		})
	}
	if p := spec.ReadinessProbe; p != nil {
		go run(probe.Readiness, p, func(r probe.Result) {
			setIfCurrent(func(c *podstatus.Container) { c.Ready = r == probe.Success })
		})
	}
	<-ctx.Done()
}

func graceOf(pod *v1.Pod) time.Duration {
	if pod.Spec.TerminationGracePeriodSeconds != nil {
		return time.Duration(*pod.Spec.TerminationGracePeriodSeconds) * time.Second
	}
	return 30 * time.Second
}

// statusLoop writes the pod's status whenever it changes, until ctx ends
// (a final pending change is written first).
func (w *podWorker) statusLoop(ctx context.Context) {
	for {
		select {
		case <-w.dirty:
		case <-ctx.Done():
			select {
			case <-w.dirty:
				w.writeStatus()
			default:
			}
			return
		}
		w.writeStatus()
		time.Sleep(20 * time.Millisecond) // coalesce bursts
	}
}

// takeDirtyAt returns the time of the oldest unwritten change (now if none
// was recorded) and starts a new period: changes after this call are
// written by the next round, changes before it by this one.
func (w *podWorker) takeDirtyAt() time.Time {
	w.dirtyMu.Lock()
	defer w.dirtyMu.Unlock()
	t := w.dirtyAt
	w.dirtyAt = time.Time{}
	if t.IsZero() {
		t = time.Now()
	}
	return t
}

// restoreDirtyAt puts back a change time whose write failed, so that the
// next write still dates the change from when it happened.
func (w *podWorker) restoreDirtyAt(t time.Time) {
	w.dirtyMu.Lock()
	if w.dirtyAt.IsZero() || t.Before(w.dirtyAt) {
		w.dirtyAt = t
	}
	w.dirtyMu.Unlock()
}

func (w *podWorker) writeStatus() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	changedAt := w.takeDirtyAt()
	pods := w.a.client.CoreV1().Pods(w.namespace)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := pods.Get(ctx, w.name, metav1.GetOptions{})
		switch {
		case w.static:
			// The Node authorizer lets a node read only the pods bound to
			// it: a mirror pod that does not exist is forbidden to get.
			if apierrors.IsForbidden(err) {
				err = apierrors.NewNotFound(v1.Resource("pods"), w.name)
			}
			w.mu.Lock()
			static := w.pod.DeepCopy()
			w.mu.Unlock()
			if cur, err = w.a.mirrorFor(ctx, static, cur, err); err != nil {
				return err
			}
		case err != nil:
			return err
		case cur.UID != w.uid:
			return apierrors.NewNotFound(v1.Resource("pods"), w.name)
		}
		w.mu.Lock()
		in := podstatus.Input{Pod: cur, SandboxReady: w.sandboxReady, HostIP: w.a.cfg.NodeIP.String(),
			StartTime: w.startTime, Now: changedAt, RuntimeScheme: RuntimeScheme,
			FailedReason: w.failReason, FailedMessage: w.failMessage}
		if !w.a.cfg.NodeIP.IsValid() {
			in.HostIP = ""
		}
		for _, ip := range w.a.nodeIPs() {
			in.HostIPs = append(in.HostIPs, ip.String())
		}
		if w.sb != nil {
			for _, ip := range w.sb.IPs() {
				in.PodIPs = append(in.PodIPs, ip.String())
			}
		}
		for _, c := range w.containers {
			in.Containers = append(in.Containers, *c)
		}
		w.mu.Unlock()
		st := podstatus.Compute(in)
		ann, hasAnn := podstatus.ReadyTransition(cur, st, changedAt)
		if equality.Semantic.DeepEqual(cur.Status, st) && (!hasAnn || cur.Annotations[podstatus.ReadyTransitionAnnotation] == ann) {
			return nil
		}
		cur.Status = st
		if hasAnn {
			// A pods/status write may change annotations (in Kubernetes too),
			// so the precise time travels in the same write as the condition.
			if cur.Annotations == nil {
				cur.Annotations = map[string]string{}
			}
			cur.Annotations[podstatus.ReadyTransitionAnnotation] = ann
		}
		_, err = pods.UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		if err == nil {
			w.mu.Lock()
			w.lastWritten = st.DeepCopy()
			w.mu.Unlock()
		}
		return err
	})
	if err != nil && !apierrors.IsNotFound(err) {
		w.restoreDirtyAt(changedAt)
		w.a.log.Warn("pod status", "pod", w.key, "err", err)
		// Try again, as the kubelet's status manager does on its periodic
		// sync.
		time.AfterFunc(2*time.Second, w.markDirty)
	}
}
