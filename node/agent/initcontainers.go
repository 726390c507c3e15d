package agent

import (
	"context"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/svcnet/svcnet/node/podstatus"
	"github.com/svcnet/svcnet/node/sandbox"
)

// role is what a container is to its pod: it decides when containerLoop
// restarts it and when it stops.
type role int

const (
	// appRole: a container of spec.containers, restarted per the pod's
	// restartPolicy, stopped with the pod.
	appRole role = iota
	// initRole: a regular init container, run to completion; a failure
	// is retried unless the pod's restartPolicy is Never.
	initRole
	// sidecarRole: an init container with restartPolicy Always, restarted
	// whenever it exits until the pod stops, and stopped after the app
	// containers.
	sidecarRole
)

// loopOpts say how containerLoop runs a container.
type loopOpts struct {
	role role
	// started (sidecars) is closed once the container has started: when
	// it runs, or when its startup probe has first succeeded.
	started chan struct{}
	// stop (sidecars) is closed when the sidecar must stop.
	stop chan struct{}
	// finished (app containers) receives a value when the container has
	// stopped for good (the restart policy does not restart it).
	finished chan<- struct{}
}

// sidecar is a running sidecar's loop.
type sidecar struct {
	started, stop, done chan struct{}
}

// allContainers are the pod's init containers, then its app containers.
func allContainers(pod *v1.Pod) []v1.Container {
	return append(append([]v1.Container(nil), pod.Spec.InitContainers...), pod.Spec.Containers...)
}

// runContainers runs the pod's containers in the sandbox, as the kubelet
// does: the init containers one at a time, in order, each regular one to
// its successful completion (a failure is retried with the crash back-off,
// or fails the pod under restartPolicy Never) and each sidecar until it
// has started (its startup probe succeeded), kept running from then on;
// then the app containers. When the app containers have stopped (the pod
// completed, or it is stopping), the sidecars are stopped in reverse
// order. It returns when every container has stopped.
//
// In a sandbox adopted from an earlier agent, completed init containers
// are not run again: once an app container has started there, the pod is
// initialized (the kubelet does not re-run init containers either while
// the sandbox exists).
func (w *podWorker) runContainers(ctx context.Context) {
	w.mu.Lock()
	pod := w.pod.DeepCopy()
	sb := w.sb
	adopted := w.adopted
	w.mu.Unlock()
	initialized := false
	if adopted {
		for _, c := range pod.Spec.Containers {
			if lastInstance(sb.Dir(), c.Name) >= 0 {
				initialized = true
			}
		}
	}
	var sidecars []*sidecar
	defer func() { w.stopSidecars(sidecars) }()
	for _, c := range pod.Spec.InitContainers {
		if podstatus.IsSidecar(&c) {
			s := &sidecar{started: make(chan struct{}), stop: make(chan struct{}), done: make(chan struct{})}
			sidecars = append(sidecars, s)
			go func() {
				defer close(s.done)
				w.containerLoop(ctx, c, loopOpts{role: sidecarRole, started: s.started, stop: s.stop})
			}()
			if initialized {
				continue
			}
			select {
			case <-s.started:
				continue
			case <-s.done:
			case <-w.stopped:
			case <-w.term:
			case <-ctx.Done():
			}
			return
		}
		if adopted {
			switch w.adoptInit(pod, c, sb, initialized) {
			case initDone:
				continue
			case initFailed:
				return
			}
		}
		if !w.containerLoop(ctx, c, loopOpts{role: initRole}) {
			// The pod stops, or failed (restartPolicy Never): the kubelet
			// kills the pod's other containers then, i.e. the sidecars.
			return
		}
	}
	w.markDirty()
	finished := make(chan struct{}, len(pod.Spec.Containers))
	var wg sync.WaitGroup
	for _, c := range pod.Spec.Containers {
		wg.Add(1)
		go func() { defer wg.Done(); w.containerLoop(ctx, c, loopOpts{role: appRole, finished: finished}) }()
	}
	all := make(chan struct{})
	go func() { wg.Wait(); close(all) }()
	for n := 0; n < len(pod.Spec.Containers); {
		select {
		case <-finished:
			n++
		case <-all:
			n = len(pod.Spec.Containers)
		}
	}
	// Every app container has stopped for good: sidecars do not keep a
	// completed pod running.
	w.stopSidecars(sidecars)
	sidecars = nil
	<-all
}

// stopSidecars stops the sidecars in reverse order, each once the one
// after it has stopped.
func (w *podWorker) stopSidecars(sidecars []*sidecar) {
	for i := len(sidecars) - 1; i >= 0; i-- {
		close(sidecars[i].stop)
		<-sidecars[i].done
	}
}

// sidecarGrace is the grace period of a sidecar's SIGTERM: what the pod's
// termination has left of its grace period once the app containers have
// stopped (at least 2 s, unless the pod is killed at once), or the pod's
// terminationGracePeriodSeconds when it completed.
func (w *podWorker) sidecarGrace(pod *v1.Pod) time.Duration {
	if !w.podStopping() {
		return graceOf(pod)
	}
	w.mu.Lock()
	grace, at := w.grace, w.termAt
	w.mu.Unlock()
	if grace <= 0 {
		return 0
	}
	return max(grace-time.Since(at), 2*time.Second)
}

// initState is what an adopted sandbox says of a regular init container.
type initState int

const (
	initRun    initState = iota // run it (or adopt its running instance)
	initDone                    // it completed
	initFailed                  // it failed and the pod's policy is Never
)

// adoptInit finds what became of the regular init container c in a
// sandbox an earlier agent started, and reports it in the status: an
// instance that ended with an exit record (the shim's) counts as it ended;
// in an initialized pod (an app container started) it completed, as the
// pod's last status said or, without one, as the kubelet assumes.
func (w *podWorker) adoptInit(pod *v1.Pod, c v1.Container, sb PodSandbox, initialized bool) initState {
	last := lastInstance(sb.Dir(), c.Name)
	if last >= 0 {
		if ca, ok := sb.(ContainerAdopter); ok {
			if rec, err := ca.ContainerExit(sandbox.LogPath(sb.Dir(), c.Name, last)); err == nil {
				term := &podstatus.Termination{ExitCode: int32(rec.ExitCode), Signal: int32(rec.Signal), StartedAt: rec.StartedAt, FinishedAt: rec.FinishedAt}
				w.setContainer(c.Name, func(s *podstatus.Container) {
					s.ID, s.RestartCount, s.Terminated = containerID(w.uid, c.Name, last), int32(last), term
				})
				switch {
				case rec.ExitCode == 0 || initialized:
					w.log()("init container completed before the agent restarted", "container", c.Name, "restartCount", last)
					return initDone
				case pod.Spec.RestartPolicy == v1.RestartPolicyNever:
					return initFailed
				}
				return initRun
			}
		}
	}
	if !initialized {
		return initRun
	}
	// No record of the instance: the status the earlier agent wrote, or
	// a completion of which nothing is known.
	for _, cs := range pod.Status.InitContainerStatuses {
		if t := cs.State.Terminated; cs.Name == c.Name && t != nil && t.ExitCode == 0 {
			w.setContainer(c.Name, func(s *podstatus.Container) {
				s.ID = trimScheme(cs.ContainerID)
				s.RestartCount = cs.RestartCount
				s.Terminated = &podstatus.Termination{Reason: t.Reason, Message: t.Message, StartedAt: t.StartedAt.Time, FinishedAt: t.FinishedAt.Time}
			})
			return initDone
		}
	}
	w.setContainer(c.Name, func(s *podstatus.Container) {
		s.RestartCount = int32(max(last, 0))
		s.Terminated = &podstatus.Termination{Reason: "Completed",
			Message: "the pod's app containers were running when the node agent restarted; the init container's own exit was not recorded"}
	})
	return initDone
}

func trimScheme(id string) string {
	if len(id) > len(RuntimeScheme) && id[:len(RuntimeScheme)] == RuntimeScheme {
		return id[len(RuntimeScheme):]
	}
	return id
}
