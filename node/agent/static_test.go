package agent

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svcnet/svcnet/node/sandbox"
)

const staticManifest = `apiVersion: v1
kind: Pod
metadata:
  name: web
  namespace: kube-system
  labels: {tier: node}
spec:
  containers:
  - name: app
    image: example/web
    command: ["sh", "-c", "echo %s; trap 'exit 0' TERM; while :; do sleep 0.05; done"]
`

// TestStaticPods: manifests in the static pod directory run without the
// API and appear in it as mirror pods, as the kubelet's do.
func TestStaticPods(t *testing.T) {
	old := StaticPodInterval
	StaticPodInterval = 100 * time.Millisecond
	t.Cleanup(func() { StaticPodInterval = old })
	dir := t.TempDir()
	write := func(name, content string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("web.yaml", strings.Replace(staticManifest, "%s", "static-v1", 1))
	write("broken.yaml", "apiVersion: v1\nkind: Service\nmetadata: {name: x}\n")
	write(".hidden.yaml", strings.Replace(strings.Replace(staticManifest, "%s", "hidden", 1), "name: web", "name: hidden", 1))
	// A mirror pod of an earlier static pod, which this node no longer has.
	orphan := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "gone-node-1",
		Annotations: map[string]string{v1.MirrorPodAnnotationKey: "0123"}},
		Spec: v1.PodSpec{NodeName: "node-1", Containers: []v1.Container{{Name: "c", Image: "x"}}}}
	e := startWith(t, func(c *Config) { c.StaticPodPath = dir }, orphan)
	ctx := context.Background()
	pods := e.client.CoreV1().Pods("kube-system")
	mirror := func() *v1.Pod {
		p, err := pods.Get(ctx, "web-node-1", metav1.GetOptions{})
		if err != nil {
			return nil
		}
		return p
	}
	var hash string
	e.eventually("mirror pod Running", func() (bool, string) {
		p := mirror()
		if p == nil {
			return false, "no mirror pod"
		}
		hash = p.Annotations[ConfigHashAnnotation]
		own := p.OwnerReferences
		ok := p.Status.Phase == v1.PodRunning && hash != "" && p.Annotations[v1.MirrorPodAnnotationKey] == hash &&
			p.Annotations[ConfigSourceAnnotation] == "file" && p.Annotations[ConfigSeenAnnotation] != "" &&
			p.Spec.NodeName == "node-1" && p.Labels["tier"] == "node" &&
			len(own) == 1 && own[0].Kind == "Node" && own[0].Name == "node-1" && own[0].Controller != nil && *own[0].Controller
		tolerates := false
		for _, t := range p.Spec.Tolerations {
			tolerates = tolerates || t.Operator == v1.TolerationOpExists && t.Effect == v1.TaintEffectNoExecute && t.Key == ""
		}
		return ok && tolerates, p.String()
	})
	sbDir := filepath.Join(e.rt.dir, "kube-system_web-node-1")
	logOf := func(restart int) string {
		b, _ := os.ReadFile(sandbox.LogPath(sbDir, "app", restart))
		return string(sandbox.LogLines(b, false))
	}
	e.eventually("the static pod's log", func() (bool, string) { return logOf(0) == "static-v1\n", logOf(0) })
	e.eventually("orphan mirror pod deleted", func() (bool, string) {
		_, err := pods.Get(ctx, "gone-node-1", metav1.GetOptions{})
		return err != nil, "still there"
	})
	if _, err := pods.Get(ctx, "hidden-node-1", metav1.GetOptions{}); err == nil {
		t.Error("a manifest whose name starts with a dot was run")
	}

	// Deleting the mirror pod does not stop the static pod: the mirror
	// comes back, the container keeps running.
	if err := pods.Delete(ctx, "web-node-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.eventually("mirror pod recreated", func() (bool, string) {
		p := mirror()
		return p != nil && p.Annotations[v1.MirrorPodAnnotationKey] == hash && p.Status.Phase == v1.PodRunning &&
			len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].RestartCount == 0, "no mirror"
	})

	// An edited manifest replaces the pod: new hash, new process.
	write("web.yaml", strings.Replace(staticManifest, "%s", "static-v2", 1))
	e.eventually("replaced pod running", func() (bool, string) {
		p := mirror()
		if p == nil {
			return false, "no mirror"
		}
		// (The test runtime keeps the old pod's directory: the new
		// instance's log follows the old one's.)
		return p.Annotations[v1.MirrorPodAnnotationKey] != hash && p.Status.Phase == v1.PodRunning &&
			strings.HasSuffix(logOf(0), "static-v2\n"), logOf(0)
	})

	// A removed manifest stops the pod and deletes its mirror.
	if err := os.Remove(filepath.Join(dir, "web.yaml")); err != nil {
		t.Fatal(err)
	}
	e.eventually("mirror pod deleted", func() (bool, string) { return mirror() == nil, "still there" })
	e.eventually("sandbox destroyed", func() (bool, string) {
		e.rt.mu.Lock()
		defer e.rt.mu.Unlock()
		sb := e.rt.sbs["kube-system/web-node-1"]
		return sb != nil && sb.destroyed.Load(), "not destroyed"
	})
}
