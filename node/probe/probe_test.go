package probe

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestSpecDefaults(t *testing.T) {
	s := SpecOf(Liveness, &v1.Probe{SuccessThreshold: 3})
	if s.Period != 10*time.Second || s.Timeout != time.Second || s.SuccessThreshold != 1 || s.FailureThreshold != 3 {
		t.Errorf("defaults: %+v", s)
	}
	if s := SpecOf(Readiness, &v1.Probe{SuccessThreshold: 2, FailureThreshold: 1}); s.SuccessThreshold != 2 || s.FailureThreshold != 1 {
		t.Errorf("readiness thresholds: %+v", s)
	}
}

// A sequence of checks and the result after each.
func TestWorkerStates(t *testing.T) {
	t0 := time.Unix(1000, 0)
	type step struct {
		in      Result
		want    Result
		changed bool
	}
	cases := []struct {
		name  string
		kind  Kind
		spec  Spec
		steps []step
		hold  bool
	}{
		{"readiness starts failed, needs successThreshold", Readiness, Spec{SuccessThreshold: 2, FailureThreshold: 3},
			[]step{{Success, Failure, false}, {Success, Success, true}, {Failure, Success, false}, {Success, Success, false},
				{Failure, Success, false}, {Failure, Success, false}, {Failure, Failure, true}, {Success, Failure, false}, {Success, Success, true}}, false},
		{"liveness starts alive, failureThreshold then hold", Liveness, Spec{SuccessThreshold: 1, FailureThreshold: 2},
			[]step{{Failure, Success, false}, {Success, Success, false}, {Failure, Success, false}, {Failure, Failure, true}}, true},
		{"startup unknown until first success", Startup, Spec{SuccessThreshold: 1, FailureThreshold: 3},
			[]step{{Failure, Unknown, false}, {Success, Success, true}}, false},
		{"startup fails after threshold", Startup, Spec{SuccessThreshold: 1, FailureThreshold: 2},
			[]step{{Failure, Unknown, false}, {Failure, Failure, true}}, true},
		{"unknown outcomes are ignored", Readiness, Spec{SuccessThreshold: 1, FailureThreshold: 1},
			[]step{{Unknown, Failure, false}, {Success, Success, true}, {Unknown, Success, false}}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := NewWorker(c.kind, c.spec, t0)
			for i, s := range c.steps {
				got, changed := w.Observe(s.in)
				if got != s.want || changed != s.changed {
					t.Fatalf("step %d: Observe(%v) = %v,%v want %v,%v", i, s.in, got, changed, s.want, s.changed)
				}
			}
			if hold := !w.ShouldProbe(t0.Add(time.Hour)); hold != c.hold && c.kind != Startup {
				t.Errorf("hold = %v, want %v", hold, c.hold)
			}
		})
	}
}

func TestInitialDelay(t *testing.T) {
	t0 := time.Unix(1000, 0)
	w := NewWorker(Readiness, Spec{InitialDelay: 5 * time.Second, SuccessThreshold: 1, FailureThreshold: 3}, t0)
	if w.ShouldProbe(t0.Add(4 * time.Second)) {
		t.Error("probed during initial delay")
	}
	if !w.ShouldProbe(t0.Add(5 * time.Second)) {
		t.Error("not probed after initial delay")
	}
	s := NewWorker(Startup, Spec{SuccessThreshold: 1, FailureThreshold: 3}, t0)
	s.Observe(Success)
	if s.ShouldProbe(t0.Add(time.Minute)) {
		t.Error("startup probe keeps running after success")
	}
}

func TestChecks(t *testing.T) {
	var ua string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ua = r.UserAgent()
		switch r.URL.Path {
		case "/healthz":
			w.WriteHeader(200)
		case "/redirect":
			http.Redirect(w, r, "/healthz", http.StatusFound)
		default:
			w.WriteHeader(503)
		}
	}))
	defer srv.Close()
	host, portStr, _ := net.SplitHostPort(srv.Listener.Addr().String())
	port, _ := strconv.Atoi(portStr)
	tg := Target{PodIP: host, Ports: []v1.ContainerPort{{Name: "http", ContainerPort: int32(port)}}}
	ctx := context.Background()
	httpProbe := func(path string, p intstr.IntOrString) *v1.Probe {
		return &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: path, Port: p}}}
	}
	if r, msg := Run(ctx, httpProbe("/healthz", intstr.FromString("http")), time.Second, tg); r != Success {
		t.Errorf("healthz: %v %s", r, msg)
	}
	if ua != UserAgent {
		t.Errorf("user agent %q", ua)
	}
	if r, _ := Run(ctx, httpProbe("/redirect", intstr.FromInt32(int32(port))), time.Second, tg); r != Success {
		t.Errorf("redirect: %v", r)
	}
	if r, msg := Run(ctx, httpProbe("/bad", intstr.FromInt32(int32(port))), time.Second, tg); r != Failure || msg != "HTTP probe failed with statuscode: 503" {
		t.Errorf("bad: %v %q", r, msg)
	}
	if r, msg := Run(ctx, httpProbe("/", intstr.FromString("nope")), time.Second, tg); r != Failure || msg != "couldn't find port: nope" {
		t.Errorf("named port missing: %v %q", r, msg)
	}
	tcp := &v1.Probe{ProbeHandler: v1.ProbeHandler{TCPSocket: &v1.TCPSocketAction{Port: intstr.FromInt32(int32(port))}}}
	if r, msg := Run(ctx, tcp, time.Second, tg); r != Success {
		t.Errorf("tcp: %v %s", r, msg)
	}
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	closed := l.Addr().(*net.TCPAddr).Port
	l.Close()
	tcp.TCPSocket.Port = intstr.FromInt32(int32(closed))
	if r, _ := Run(ctx, tcp, time.Second, tg); r != Failure {
		t.Errorf("tcp closed port: %v", r)
	}
	tg.Exec = func(_ context.Context, cmd []string) (int, error) {
		if cmd[0] == "true" {
			return 0, nil
		}
		return 1, nil
	}
	ex := &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"true"}}}}
	if r, _ := Run(ctx, ex, time.Second, tg); r != Success {
		t.Errorf("exec true: %v", r)
	}
	ex.Exec.Command = []string{"false"}
	if r, msg := Run(ctx, ex, time.Second, tg); r != Failure || msg != `command "false" exited with 1` {
		t.Errorf("exec false: %v %q", r, msg)
	}
}
