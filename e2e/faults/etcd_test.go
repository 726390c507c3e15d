package faults

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

const etcdBinary = "/usr/bin/etcd" // Debian's etcd-server

type etcdMember struct {
	name, dir, client, peer string
	args                    []string
	p                       *proc
}

// TestEtcdMemberKill9UnderLoad runs `svcnet apiserver` on an external
// 3-member etcd cluster (Debian's etcd), writes ConfigMaps continuously and
// watches them with a client-go informer, kills the etcd leader with
// SIGKILL, restarts it later, and checks that no acknowledged write is lost
// and that the informer ends up with every object.
func TestEtcdMemberKill9UnderLoad(t *testing.T) {
	needBinary(t)
	if _, err := os.Stat(etcdBinary); err != nil {
		t.Skipf("etcd not installed (Debian package etcd-server): %v", err)
	}
	base := t.TempDir()
	var members []*etcdMember
	var initial []string
	for i := 1; i <= 3; i++ {
		m := &etcdMember{name: fmt.Sprintf("m%d", i), dir: filepath.Join(base, fmt.Sprintf("m%d", i)),
			client: fmt.Sprintf("http://127.0.0.1:%d", freePort(t)), peer: fmt.Sprintf("http://127.0.0.1:%d", freePort(t))}
		members = append(members, m)
		initial = append(initial, m.name+"="+m.peer)
	}
	var clients []string
	for _, m := range members {
		m.args = []string{"--name", m.name, "--data-dir", m.dir,
			"--listen-client-urls", m.client, "--advertise-client-urls", m.client,
			"--listen-peer-urls", m.peer, "--initial-advertise-peer-urls", m.peer,
			"--initial-cluster", strings.Join(initial, ","), "--initial-cluster-state", "new",
			"--initial-cluster-token", "svcnet-faults", "--log-level", "error"}
		m.p = start(t, etcdBinary, m.args...)
		clients = append(clients, m.client)
	}
	ec, err := clientv3.New(clientv3.Config{Endpoints: clients, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer ec.Close()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := ec.Put(ctx, "/faults/health", "ok")
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("etcd cluster not ready: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}

	dataDir := t.TempDir()
	api := start(t, bin, "apiserver", "--data-dir", dataDir, "--secure-port", strconv.Itoa(freePort(t)),
		"--etcd-servers", strings.Join(clients, ","), "--repair-interval", "1h")
	cfg := waitAPI(t, api, dataDir, 60*time.Second)
	c := kubernetes.NewForConfigOrDie(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "faults"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	factory := informers.NewSharedInformerFactoryWithOptions(c, 0, informers.WithNamespace("faults"))
	inf := factory.Core().V1().ConfigMaps().Informer()
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("informer did not sync")
	}

	var acked sync.Map
	var nAcked, nFailed atomic.Int64
	var lastAck atomic.Int64
	var maxGap atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				name := fmt.Sprintf("cm-%d-%05d", w, i)
				wctx, wcancel := context.WithTimeout(ctx, 5*time.Second)
				_, err := c.CoreV1().ConfigMaps("faults").Create(wctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name},
					Data: map[string]string{"i": strconv.Itoa(i)}}, metav1.CreateOptions{})
				wcancel()
				if err != nil {
					nFailed.Add(1)
					time.Sleep(20 * time.Millisecond)
					continue
				}
				now := time.Now().UnixNano()
				if prev := lastAck.Swap(now); prev != 0 && now-prev > maxGap.Load() {
					maxGap.Store(now - prev)
				}
				acked.Store(name, true)
				nAcked.Add(1)
			}
		}(w)
	}
	time.Sleep(2 * time.Second)
	var leader *etcdMember
	for _, m := range members {
		sctx, scancel := context.WithTimeout(ctx, time.Second)
		st, err := ec.Status(sctx, m.client)
		scancel()
		if err == nil && st.Leader == st.Header.MemberId {
			leader = m
		}
	}
	if leader == nil {
		t.Fatal("no etcd leader found")
	}
	beforeKill := nAcked.Load()
	leader.p.kill()
	killedAt := time.Now()
	time.Sleep(3 * time.Second)
	duringOutage := nAcked.Load() - beforeKill
	leader.p = start(t, etcdBinary, leader.args...)
	downFor := time.Since(killedAt)
	time.Sleep(2 * time.Second)
	close(stop)
	wg.Wait()
	t.Logf("etcd: leader %s SIGKILLed after %d acknowledged writes; %d writes acknowledged in the 3 s with two members; restarted after %s; longest gap between acknowledged writes %s",
		leader.name, beforeKill, duringOutage, downFor.Round(time.Millisecond), time.Duration(maxGap.Load()).Round(time.Millisecond))

	list, err := c.CoreV1().ConfigMaps("faults").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	stored := map[string]bool{}
	for _, cm := range list.Items {
		stored[cm.Name] = true
	}
	lost := 0
	acked.Range(func(k, _ any) bool {
		if !stored[k.(string)] {
			lost++
			t.Errorf("acknowledged ConfigMap %s lost", k)
		}
		return true
	})
	t.Logf("etcd: %d writes acknowledged, %d failed (during the election), %d lost, %d stored", nAcked.Load(), nFailed.Load(), lost, len(stored))

	// The informer catches up with the stored state (its watch went through
	// the dead member or was cut by the leader change and resumed/relisted).
	t0 := time.Now()
	for {
		missing := 0
		for name := range stored {
			if _, ok, _ := inf.GetStore().GetByKey("faults/" + name); !ok {
				missing++
			}
		}
		if missing == 0 && len(inf.GetStore().ListKeys()) == len(stored) {
			t.Logf("etcd: informer holds all %d ConfigMaps %s after the load stopped", len(stored), time.Since(t0).Round(time.Millisecond))
			break
		}
		if time.Since(t0) > 30*time.Second {
			t.Fatalf("informer misses %d of %d ConfigMaps after 30 s", missing, len(stored))
		}
		time.Sleep(100 * time.Millisecond)
	}
	if lost > 0 {
		t.Fatalf("%d acknowledged writes lost", lost)
	}
}
