// Package probe implements the kubelet's container probes: the per-probe
// state machine (initial results, initialDelaySeconds, failureThreshold,
// successThreshold, holding after a liveness or startup failure) and the
// three checks (httpGet, tcpSocket, exec).
//
// A Worker is pure: the caller runs the check every periodSeconds and feeds
// the outcome to Observe, which says what the probe's result now is. Before
// the first result is established a probe has its initial result: Failure
// for readiness (a pod is not ready until proven so), Success for liveness
// (a container is alive until proven dead), Unknown for startup.
package probe

import (
	"time"

	v1 "k8s.io/api/core/v1"
)

// Kind is the probe's role.
type Kind int

const (
	Readiness Kind = iota
	Liveness
	Startup
)

func (k Kind) String() string {
	switch k {
	case Readiness:
		return "Readiness"
	case Liveness:
		return "Liveness"
	default:
		return "Startup"
	}
}

// Result is the outcome of one check or the current state of a probe.
type Result int

const (
	Unknown Result = iota
	Success
	Failure
)

func (r Result) String() string {
	switch r {
	case Success:
		return "Success"
	case Failure:
		return "Failure"
	default:
		return "Unknown"
	}
}

// Spec is a probe's timing with Kubernetes' defaults applied.
type Spec struct {
	InitialDelay     time.Duration
	Period           time.Duration
	Timeout          time.Duration
	SuccessThreshold int
	FailureThreshold int
}

// SpecOf applies the API defaults (period 10s, timeout 1s, thresholds 1 and
// 3) to p's timing fields. Liveness and startup probes always use a success
// threshold of 1, as validation requires.
func SpecOf(k Kind, p *v1.Probe) Spec {
	s := Spec{
		InitialDelay:     time.Duration(p.InitialDelaySeconds) * time.Second,
		Period:           time.Duration(p.PeriodSeconds) * time.Second,
		Timeout:          time.Duration(p.TimeoutSeconds) * time.Second,
		SuccessThreshold: int(p.SuccessThreshold),
		FailureThreshold: int(p.FailureThreshold),
	}
	if s.Period <= 0 {
		s.Period = 10 * time.Second
	}
	if s.Timeout <= 0 {
		s.Timeout = time.Second
	}
	if s.SuccessThreshold <= 0 || k != Readiness {
		s.SuccessThreshold = 1
	}
	if s.FailureThreshold <= 0 {
		s.FailureThreshold = 3
	}
	return s
}

// Worker tracks one probe of one container instance. A new container
// instance (a restart) needs a new Worker.
type Worker struct {
	Kind Kind
	Spec Spec

	result  Result
	last    Result
	run     int
	onHold  bool
	started time.Time
}

// NewWorker returns a worker for a container that started running at
// started, holding the probe's initial result.
func NewWorker(k Kind, spec Spec, started time.Time) *Worker {
	w := &Worker{Kind: k, Spec: spec, started: started}
	switch k {
	case Readiness:
		w.result = Failure
	case Liveness:
		w.result = Success
	default:
		w.result = Unknown
	}
	return w
}

// Result is the probe's current result.
func (w *Worker) Result() Result { return w.result }

// ShouldProbe reports whether a check is due to run at now: not during the
// initial delay, not after a liveness or startup failure (the container is
// being restarted), and never again once a startup probe has succeeded.
func (w *Worker) ShouldProbe(now time.Time) bool {
	if w.onHold {
		return false
	}
	if w.Kind == Startup && w.result == Success {
		return false
	}
	return now.Sub(w.started) >= w.Spec.InitialDelay
}

// Observe records the outcome of one check and returns the probe's result
// and whether it changed. The result flips only after FailureThreshold
// consecutive failures or SuccessThreshold consecutive successes. A
// liveness or startup probe that flips to Failure puts the worker on hold:
// the caller must kill the container.
func (w *Worker) Observe(r Result) (Result, bool) {
	if r == Unknown {
		return w.result, false
	}
	if r == w.last {
		w.run++
	} else {
		w.last, w.run = r, 1
	}
	if (r == Failure && w.run < w.Spec.FailureThreshold) || (r == Success && w.run < w.Spec.SuccessThreshold) {
		return w.result, false
	}
	changed := w.result != r
	w.result = r
	if r == Failure && (w.Kind == Liveness || w.Kind == Startup) {
		w.onHold = true
		w.run = 0
	}
	return w.result, changed
}
