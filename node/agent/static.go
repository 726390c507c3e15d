package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
)

// Static pods, as the kubelet's --pod-manifest-path: every file of the
// directory (not starting with ".") holds one Pod, which the agent runs
// without the API server and shows in the API as a mirror pod. The pod is
// named NAME-NODE (the node's name in lower case), its UID is a hash of
// the manifest (annotation kubernetes.io/config.hash), it tolerates every
// NoExecute taint, and its mirror pod carries kubernetes.io/config.mirror
// and is owned by the Node. The mirror pod only reports: deleting it makes
// the agent create it again, and a changed manifest replaces the running
// pod (a new hash, a new UID). The directory is read again every
// StaticPodInterval.
const (
	ConfigHashAnnotation   = "kubernetes.io/config.hash"
	ConfigSourceAnnotation = "kubernetes.io/config.source"
	ConfigSeenAnnotation   = "kubernetes.io/config.seen"
)

// StaticPodInterval is how often the manifest directory is read again
// (the kubelet's fileCheckFrequency is 20 s; this directory is local and
// small).
var StaticPodInterval = 5 * time.Second

// readStaticPods returns the pods of dir's manifests by their pod name
// (namespace/name). A manifest that cannot be read or is not a valid Pod
// is reported in errs and skipped, as the kubelet skips it.
func readStaticPods(dir, nodeName string) (map[string]*v1.Pod, []error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		if os.IsNotExist(err) {
			return nil, nil
		}
		return nil, []error{err}
	}
	pods := map[string]*v1.Pod{}
	var errs []error
	for _, e := range entries {
		if e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		path := filepath.Join(dir, e.Name())
		pod, err := staticPod(path, nodeName)
		if err != nil {
			errs = append(errs, fmt.Errorf("static pod %s: %w", path, err))
			continue
		}
		key := pod.Namespace + "/" + pod.Name
		if _, dup := pods[key]; dup {
			errs = append(errs, fmt.Errorf("static pod %s: pod %s is also defined by another manifest; ignored", path, key))
			continue
		}
		pods[key] = pod
	}
	return pods, errs
}

// staticPod reads one manifest and applies the kubelet's defaults for a
// pod of the file source.
func staticPod(path, nodeName string) (*v1.Pod, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	obj, gvk, err := scheme.Codecs.UniversalDeserializer().Decode(data, nil, nil)
	if err != nil {
		return nil, err
	}
	pod, ok := obj.(*v1.Pod)
	if !ok {
		return nil, fmt.Errorf("holds a %s, not a Pod", gvk.Kind)
	}
	if pod.Name == "" {
		return nil, fmt.Errorf("metadata.name: Required value")
	}
	if len(pod.Spec.Containers) == 0 {
		return nil, fmt.Errorf("spec.containers: Required value")
	}
	seen := map[string]bool{}
	for i, c := range pod.Spec.Containers {
		if c.Name == "" || seen[c.Name] {
			return nil, fmt.Errorf("spec.containers[%d].name: a unique name is required", i)
		}
		seen[c.Name] = true
	}
	for i, c := range pod.Spec.InitContainers {
		if c.Name == "" || seen[c.Name] {
			return nil, fmt.Errorf("spec.initContainers[%d].name: a unique name is required", i)
		}
		seen[c.Name] = true
	}
	// The hash covers the manifest as decoded, the node and the source, so
	// that an edit gives the pod a new UID.
	canon, _ := json.Marshal(pod)
	h := sha256.New()
	h.Write(canon)
	fmt.Fprintf(h, "host:%s\nfile:%s", nodeName, path)
	hash := hex.EncodeToString(h.Sum(nil)[:16])
	pod.UID = types.UID(hash)
	pod.Name = pod.Name + "-" + strings.ToLower(nodeName)
	if pod.Namespace == "" {
		pod.Namespace = metav1.NamespaceDefault
	}
	pod.Spec.NodeName = nodeName
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations[ConfigHashAnnotation] = hash
	pod.Annotations[ConfigSourceAnnotation] = "file"
	tolerated := false
	for _, t := range pod.Spec.Tolerations {
		tolerated = tolerated || t.Key == "" && t.Operator == v1.TolerationOpExists && t.Effect == v1.TaintEffectNoExecute
	}
	if !tolerated {
		pod.Spec.Tolerations = append(pod.Spec.Tolerations, v1.Toleration{Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute})
	}
	pod.Status = v1.PodStatus{Phase: v1.PodPending}
	return pod, nil
}

// syncStaticPods reads the manifests and starts, replaces or stops the
// static pods accordingly. Mirror pods of this node that no running
// static pod claims are deleted.
func (a *Agent) syncStaticPods(ctx context.Context) {
	pods, errs := readStaticPods(a.cfg.StaticPodPath, a.cfg.NodeName)
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, err := range errs {
		if a.staticErrs[err.Error()] {
			continue
		}
		a.log.Error("static pod manifest skipped", "err", err)
		a.staticErrs[err.Error()] = true
	}
	keys := make([]string, 0, len(pods))
	for k := range pods {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, key := range keys {
		pod := pods[key]
		cur := a.static[key]
		if cur != nil && cur.uid == pod.UID {
			continue
		}
		seen := time.Now().Format(time.RFC3339Nano)
		pod.Annotations[ConfigSeenAnnotation] = seen
		var prev *podWorker
		if cur != nil {
			a.log.Info("static pod manifest changed; replacing the pod", "pod", key)
			cur.terminate(graceOf(cur.pod), false)
			prev = cur
		} else {
			a.log.Info("starting static pod", "pod", key, "hash", pod.UID)
		}
		a.static[key] = a.startWorker(ctx, pod, true, prev)
	}
	for key, w := range a.static {
		if _, ok := pods[key]; ok {
			continue
		}
		a.log.Info("static pod manifest removed; stopping the pod", "pod", key)
		w.mu.Lock()
		w.removeMirror = true
		grace := graceOf(w.pod)
		w.mu.Unlock()
		w.terminate(grace, false)
		delete(a.static, key)
	}
}

// mirrorChanged handles a mirror pod seen in the API: one whose static pod
// runs here and that is being deleted or names another version is
// recreated (by the static pod's next status write); one no static pod
// claims is deleted, once the manifests have been read.
func (a *Agent) mirrorChanged(ctx context.Context, pod *v1.Pod) {
	a.mu.Lock()
	w := a.static[pod.Namespace+"/"+pod.Name]
	loaded := a.staticLoaded
	a.mu.Unlock()
	switch {
	case w != nil:
		if pod.DeletionTimestamp != nil || pod.Annotations[v1.MirrorPodAnnotationKey] != string(w.uid) {
			w.markDirty()
		}
	case loaded && pod.DeletionTimestamp == nil:
		a.log.Info("deleting a mirror pod without a static pod", "pod", pod.Namespace+"/"+pod.Name)
		go a.deletePod(ctx, pod)
	}
}

// mirrorGone: a static pod's mirror pod was deleted; the next status write
// creates it again.
func (a *Agent) mirrorGone(pod *v1.Pod) {
	a.mu.Lock()
	w := a.static[pod.Namespace+"/"+pod.Name]
	a.mu.Unlock()
	if w != nil {
		w.markDirty()
	}
}

// mirrorFor returns the API's mirror pod of the static pod, creating it
// (or replacing one of another version or being deleted) as the kubelet
// does. cur and getErr are the result of a Get of the pod's name.
func (a *Agent) mirrorFor(ctx context.Context, static *v1.Pod, cur *v1.Pod, getErr error) (*v1.Pod, error) {
	pods := a.client.CoreV1().Pods(static.Namespace)
	hash := string(static.UID)
	if getErr == nil {
		if _, mirror := cur.Annotations[v1.MirrorPodAnnotationKey]; !mirror {
			return nil, fmt.Errorf("pod %s/%s exists and is not the mirror pod of the static pod of that name", cur.Namespace, cur.Name)
		}
		if cur.Annotations[v1.MirrorPodAnnotationKey] == hash && cur.DeletionTimestamp == nil {
			return cur, nil
		}
		zero := int64(0)
		uid := cur.UID
		err := pods.Delete(ctx, cur.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero, Preconditions: &metav1.Preconditions{UID: &uid}})
		if err != nil && !apierrors.IsNotFound(err) {
			return nil, err
		}
	} else if !apierrors.IsNotFound(getErr) {
		return nil, getErr
	}
	node, err := a.client.CoreV1().Nodes().Get(ctx, a.cfg.NodeName, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	controller := true
	m := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: static.Name, Namespace: static.Namespace, Labels: static.Labels,
			Annotations: map[string]string{v1.MirrorPodAnnotationKey: hash},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID,
				Controller: &controller}}},
		Spec: *static.Spec.DeepCopy(),
	}
	for k, v := range static.Annotations {
		m.Annotations[k] = v
	}
	created, err := pods.Create(ctx, m, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("create mirror pod: %w", err)
	}
	a.log.Info("created mirror pod", "pod", static.Namespace+"/"+static.Name)
	return created, nil
}

// deleteMirror deletes the static pod's mirror pod if it is of this
// version.
func (a *Agent) deleteMirror(ctx context.Context, static *v1.Pod) {
	pods := a.client.CoreV1().Pods(static.Namespace)
	cur, err := pods.Get(ctx, static.Name, metav1.GetOptions{})
	if err != nil || cur.Annotations[v1.MirrorPodAnnotationKey] != string(static.UID) {
		return
	}
	a.deletePod(ctx, cur)
}
