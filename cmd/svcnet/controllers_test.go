package main

import (
	"context"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/svcnet/svcnet/apiserver/apiservertest"
)

// Two instances of svcnet controllers with --leader-elect: one runs the
// controllers and holds kube-controller-manager's Lease (with the
// LeaderElection Event); when it stops it releases the Lease and the other
// takes over within a retry period, not a lease duration.
func TestLeaderElection(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd and the apiserver")
	}
	srv := apiservertest.Start(t)
	client := kubernetes.NewForConfigOrDie(srv.Config)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	le := leaderElection{enabled: true, leaseDuration: 15 * time.Second, renewDeadline: 10 * time.Second,
		retryPeriod: 200 * time.Millisecond, name: "kube-controller-manager", namespace: "kube-system"}

	var running [2]atomic.Bool
	var cancels [2]context.CancelFunc
	done := make(chan int, 2)
	for i := range 2 {
		ctx, cancel := context.WithCancel(context.Background())
		cancels[i] = cancel
		go func() {
			_ = le.run(ctx, client, log, func(ctx context.Context) error {
				running[i].Store(true)
				<-ctx.Done()
				running[i].Store(false)
				return nil
			})
			done <- i
		}()
	}
	t.Cleanup(func() { cancels[0](); cancels[1]() })
	waitUntil(t, 20*time.Second, "one instance leads", func() bool { return running[0].Load() || running[1].Load() })
	time.Sleep(time.Second) // several retry periods: the other must still wait
	if running[0].Load() && running[1].Load() {
		t.Fatal("both instances run the controllers")
	}
	leader := 0
	if running[1].Load() {
		leader = 1
	}
	lease, err := client.CoordinationV1().Leases("kube-system").Get(context.Background(), "kube-controller-manager", metav1.GetOptions{})
	if err != nil || lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "" {
		t.Fatalf("Lease kube-system/kube-controller-manager: %v %+v", err, lease)
	}
	waitUntil(t, 10*time.Second, "the LeaderElection Event", func() bool {
		evs, err := client.CoreV1().Events("kube-system").List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return false
		}
		for _, e := range evs.Items {
			if e.Reason == "LeaderElection" && e.InvolvedObject.Kind == "Lease" && e.Source.Component == "kube-controller-manager" {
				return true
			}
		}
		return false
	})

	start := time.Now()
	cancels[leader]()
	if got := <-done; got != leader {
		t.Fatalf("instance %d stopped, want %d", got, leader)
	}
	waitUntil(t, 10*time.Second, "the other instance takes over", func() bool { return running[1-leader].Load() })
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("take-over took %s: the Lease was not released", d)
	}
}

func waitUntil(t *testing.T, d time.Duration, what string, f func() bool) {
	t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if f() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}
