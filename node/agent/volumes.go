package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/svcnet/svcnet/node/sandbox"
)

// Pod volumes, set up as the kubelet's volume manager does before a pod's
// sandbox exists: emptyDir, configMap, secret, downwardAPI and projected
// (serviceAccountToken, configMap, secret and downwardAPI sources) volumes
// are written under the pod's directory, DIR/volumes/NAME, and each
// container's volumeMounts become bind mounts of the pod's private mount
// namespace (sandbox.Mount), which its infra process makes. A pod's
// containers share that one namespace, so every container sees the mounts
// of all of them. Other volume types are not mounted (the container sees
// the node's path), with a warning in the log.

// volumesDir is the directory of a pod's volumes under its own.
const volumesDir = "volumes"

// defaultFileMode is the mode of a volume's files without defaultMode or
// mode (the API's default of every defaultMode, 0644).
const defaultFileMode os.FileMode = 0o644

const (
	// tokenMaxTTL: a token is replaced at the latest this long after it
	// was issued, however long it lives (the kubelet token manager's
	// maxTTL).
	tokenMaxTTL = 24 * time.Hour
	// tokenMinRefresh is the shortest wait before a token is requested
	// again, should one come back (nearly) expired.
	tokenMinRefresh = time.Second
	// tokenRetryMax caps the wait after a failed token request.
	tokenRetryMax = time.Minute
)

// tokenRefreshAt is when a token issued at issued and expiring at expires
// (its status.expirationTimestamp) is replaced: once 80% of its lifetime
// has passed, or tokenMaxTTL after it was issued, whichever comes first,
// as the kubelet's token manager does; never sooner than tokenMinRefresh
// after it was issued.
func tokenRefreshAt(issued, expires time.Time) time.Time {
	at := issued.Add(expires.Sub(issued) / 10 * 8) // divided first: Sub saturates, a product could overflow
	if latest := issued.Add(tokenMaxTTL); latest.Before(at) {
		at = latest
	}
	if earliest := issued.Add(tokenMinRefresh); at.Before(earliest) {
		at = earliest
	}
	return at
}

// tokenRetryDelay is the wait after the n-th failed token request in a row
// (n >= 1): a second, doubling up to tokenRetryMax.
func tokenRetryDelay(n int) time.Duration {
	d := time.Second
	for i := 1; i < n && d < tokenRetryMax; i++ {
		d *= 2
	}
	return min(d, tokenRetryMax)
}

// mountError is a volume that could not be set up. The pod's containers
// wait (ContainerCreating) and the agent tries again, as the kubelet does;
// the message is the kubelet's FailedMount event's.
type mountError struct {
	volume string
	err    error
}

func (e *mountError) Error() string {
	return fmt.Sprintf("MountVolume.SetUp failed for volume %q : %v", e.volume, e.err)
}

func (e *mountError) Unwrap() error { return e.err }

// volumeFile is one file of a volume.
type volumeFile struct {
	data []byte
	mode os.FileMode
}

// podToken is one serviceAccountToken file of a pod and the token it holds.
type podToken struct {
	path      string
	mode      os.FileMode
	source    v1.ServiceAccountTokenProjection
	token     string
	refreshAt time.Time // zero: request one now
	failures  int       // failed requests in a row
	// written: the file holds token. A volume that failed as a whole (a
	// missing ConfigMap beside the token) did not write it; the refresher
	// then does.
	written bool
}

// podVolumes sets up one pod's volumes and keeps its tokens fresh. A pod
// worker has one for its life: the tokens it got survive a failed attempt
// to create the sandbox.
type podVolumes struct {
	client kubernetes.Interface
	pod    *v1.Pod
	hostIP string
	log    *slog.Logger

	mu     sync.Mutex
	tokens map[string]*podToken // by file path
	warned map[string]bool      // unsupported volumes already logged
	// written are the files each volume directory got from its last
	// write (relative paths), so that a key gone from its ConfigMap or
	// Secret goes from the volume too.
	written map[string]map[string]bool
	// syncErr is the last error of each volume's content sync, logged
	// once.
	syncErr map[string]string
}

func newPodVolumes(client kubernetes.Interface, pod *v1.Pod, hostIP string, log *slog.Logger) *podVolumes {
	return &podVolumes{client: client, pod: pod.DeepCopy(), hostIP: hostIP, log: log,
		tokens: map[string]*podToken{}, warned: map[string]bool{}, written: map[string]map[string]bool{}, syncErr: map[string]string{}}
}

// setUp writes the pod's volumes under dir (the pod's directory) for a pod
// with address ip, and returns the bind mounts of its containers'
// volumeMounts. Volumes already there are brought up to date (emptyDir
// keeps its content): a restarted agent calls it again for the pods it
// adopts, which gets them fresh tokens. Every volume is tried; the failures
// are joined in the error, each a *mountError.
func (v *podVolumes) setUp(ctx context.Context, dir string, ip netip.Addr) ([]sandbox.Mount, error) {
	root := filepath.Join(dir, volumesDir)
	// The volumes (tokens, secrets) are the pod's: other users of the node
	// have no business in them. Containers reach them through their mount
	// points, not through this directory.
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("volumes: %w", err)
	}
	if err := os.MkdirAll(root, 0o700); err != nil {
		return nil, fmt.Errorf("volumes: %w", err)
	}
	if err := os.Chmod(root, 0o700); err != nil {
		return nil, fmt.Errorf("volumes: %w", err)
	}
	var errs []error
	for _, vol := range v.pod.Spec.Volumes {
		if err := v.setUpVolume(ctx, root, vol, ip); err != nil {
			errs = append(errs, &mountError{volume: vol.Name, err: err})
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	mounts, skipped, err := podMounts(v.pod, dir)
	if err != nil {
		return nil, err
	}
	v.mu.Lock()
	for _, s := range skipped {
		if !v.warned[s] {
			v.warned[s] = true
			v.log.Warn("volume type not supported by svcnet; not mounted (the container sees the node's path)", "pod", v.pod.Namespace+"/"+v.pod.Name, "volume", s)
		}
	}
	v.mu.Unlock()
	for _, m := range mounts {
		// A subPath the volume lacks is made a directory, as the kubelet
		// makes it.
		if _, err := os.Lstat(m.Source); errors.Is(err, os.ErrNotExist) {
			if err := os.MkdirAll(m.Source, 0o755); err != nil {
				return nil, fmt.Errorf("volume subPath: %w", err)
			}
		}
	}
	return mounts, nil
}

// setUpVolume writes one volume into root/NAME. A volume of a type svcnet
// does not support is left alone (podMounts skips its mounts).
func (v *podVolumes) setUpVolume(ctx context.Context, root string, vol v1.Volume, ip netip.Addr) error {
	if err := validVolumeName(vol.Name); err != nil {
		return err
	}
	vdir := filepath.Join(root, vol.Name)
	var files map[string]volumeFile
	var err error
	switch s := vol.VolumeSource; {
	case s.EmptyDir != nil:
		// On the node's disk, world-writable as the kubelet makes it
		// (medium Memory and sizeLimit are not applied); its content
		// lives as long as the pod's directory.
		if err := os.MkdirAll(vdir, 0o777); err != nil {
			return err
		}
		return os.Chmod(vdir, 0o777)
	case s.HostPath != nil:
		return checkHostPath(s.HostPath)
	case s.ConfigMap != nil:
		files, err = v.configMapFiles(ctx, s.ConfigMap.Name, s.ConfigMap.Items, s.ConfigMap.Optional, fileMode(s.ConfigMap.DefaultMode, defaultFileMode))
	case s.Secret != nil:
		files, err = v.secretFiles(ctx, s.Secret.SecretName, s.Secret.Items, s.Secret.Optional, fileMode(s.Secret.DefaultMode, defaultFileMode))
	case s.DownwardAPI != nil:
		files, err = v.downwardAPIFiles(s.DownwardAPI.Items, fileMode(s.DownwardAPI.DefaultMode, defaultFileMode), ip)
	case s.Projected != nil:
		files, err = v.projectedFiles(ctx, vdir, s.Projected, ip)
	default:
		return nil
	}
	if err != nil {
		return err
	}
	v.mu.Lock()
	prev := v.written[vdir]
	v.mu.Unlock()
	if err := writeVolume(vdir, files, prev); err != nil {
		return err
	}
	v.mu.Lock()
	for _, t := range v.tokens {
		if strings.HasPrefix(t.path, vdir+"/") {
			t.written = true
		}
	}
	names := make(map[string]bool, len(files))
	for rel := range files {
		names[rel] = true
	}
	v.written[vdir] = names
	v.mu.Unlock()
	return nil
}

// contentSyncPeriod is how often a running pod's configMap, secret,
// downwardAPI and projected volumes are brought up to date with their
// ConfigMaps, Secrets and the pod's labels and annotations (the kubelet
// does it at its periodic pod sync, every minute or so).
var contentSyncPeriod = 10 * time.Second

// syncContents keeps the files of the pod's configMap, secret, downwardAPI
// and projected volumes current until ctx ends, as the kubelet does: a
// changed key is replaced atomically, a new key appears, a key removed
// from its ConfigMap or Secret goes. A volume whose source cannot be read
// now (a ConfigMap deleted, say) keeps its files; the failure is logged
// once. Files mounted by subPath are separate bind mounts of the file as
// it was and do not change, as with the kubelet. latest returns the pod as
// the agent knows it now (its labels and annotations).
func (v *podVolumes) syncContents(ctx context.Context, dir string, ip netip.Addr, latest func() *v1.Pod) {
	root := filepath.Join(dir, volumesDir)
	t := time.NewTicker(contentSyncPeriod)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if p := latest(); p != nil {
			v.mu.Lock()
			v.pod.Labels, v.pod.Annotations = maps.Clone(p.Labels), maps.Clone(p.Annotations)
			v.mu.Unlock()
		}
		for _, vol := range v.pod.Spec.Volumes {
			s := vol.VolumeSource
			if s.ConfigMap == nil && s.Secret == nil && s.DownwardAPI == nil && s.Projected == nil {
				continue
			}
			err := v.setUpVolume(ctx, root, vol, ip)
			if ctx.Err() != nil {
				return
			}
			msg := ""
			if err != nil {
				msg = err.Error()
			}
			v.mu.Lock()
			changed := v.syncErr[vol.Name] != msg
			v.syncErr[vol.Name] = msg
			v.mu.Unlock()
			if changed && err != nil {
				v.log.Warn("volume not brought up to date; it keeps its files", "pod", v.pod.Namespace+"/"+v.pod.Name, "volume", vol.Name, "err", err)
			}
		}
	}
}

// projectedFiles are the files of every source of a projected volume.
func (v *podVolumes) projectedFiles(ctx context.Context, vdir string, p *v1.ProjectedVolumeSource, ip netip.Addr) (map[string]volumeFile, error) {
	def := fileMode(p.DefaultMode, defaultFileMode)
	files := map[string]volumeFile{}
	for i, src := range p.Sources {
		var part map[string]volumeFile
		var err error
		switch {
		case src.ServiceAccountToken != nil:
			part, err = v.tokenFiles(ctx, vdir, *src.ServiceAccountToken, def)
		case src.ConfigMap != nil:
			part, err = v.configMapFiles(ctx, src.ConfigMap.Name, src.ConfigMap.Items, src.ConfigMap.Optional, def)
		case src.Secret != nil:
			part, err = v.secretFiles(ctx, src.Secret.Name, src.Secret.Items, src.Secret.Optional, def)
		case src.DownwardAPI != nil:
			part, err = v.downwardAPIFiles(src.DownwardAPI.Items, def, ip)
		default:
			err = fmt.Errorf("sources[%d]: only serviceAccountToken, configMap, secret and downwardAPI sources are supported by svcnet", i)
		}
		if err != nil {
			return nil, err
		}
		maps.Copy(files, part)
	}
	return files, nil
}

// configMapFiles are a ConfigMap's keys (or the items' keys) as files, as
// the kubelet's configMap volume writes them. A missing ConfigMap or key
// is an error unless optional.
func (v *podVolumes) configMapFiles(ctx context.Context, name string, items []v1.KeyToPath, optional *bool, def os.FileMode) (map[string]volumeFile, error) {
	cm, err := v.client.CoreV1().ConfigMaps(v.pod.Namespace).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err) && isOptional(optional):
		return nil, nil
	case apierrors.IsNotFound(err):
		return nil, fmt.Errorf("configmap %q not found", name)
	case err != nil:
		return nil, fmt.Errorf("get configmap %q: %w", name, err)
	}
	data := map[string][]byte{}
	for k, s := range cm.Data {
		data[k] = []byte(s)
	}
	maps.Copy(data, cm.BinaryData)
	return keyFiles(data, items, isOptional(optional), def, "configmap references non-existent config key: %s")
}

// secretFiles are a Secret's keys (or the items' keys) as files.
func (v *podVolumes) secretFiles(ctx context.Context, name string, items []v1.KeyToPath, optional *bool, def os.FileMode) (map[string]volumeFile, error) {
	s, err := v.client.CoreV1().Secrets(v.pod.Namespace).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err) && isOptional(optional):
		return nil, nil
	case apierrors.IsNotFound(err):
		return nil, fmt.Errorf("secret %q not found", name)
	case err != nil:
		return nil, fmt.Errorf("get secret %q: %w", name, err)
	}
	return keyFiles(s.Data, items, isOptional(optional), def, "references non-existent secret key: %s")
}

// keyFiles maps data to files: every key under its own name, or the items
// (key → path, with their own mode). missingKey formats the error of an
// item whose key data lacks (not an error when optional).
func keyFiles(data map[string][]byte, items []v1.KeyToPath, optional bool, def os.FileMode, missingKey string) (map[string]volumeFile, error) {
	files := map[string]volumeFile{}
	if len(items) == 0 {
		for k, b := range data {
			if err := validRelPath(k); err != nil {
				return nil, err
			}
			files[k] = volumeFile{data: b, mode: def}
		}
		return files, nil
	}
	for _, it := range items {
		b, ok := data[it.Key]
		if !ok {
			if optional {
				continue
			}
			return nil, fmt.Errorf(missingKey, it.Key)
		}
		if err := validRelPath(it.Path); err != nil {
			return nil, err
		}
		files[it.Path] = volumeFile{data: b, mode: fileMode(it.Mode, def)}
	}
	return files, nil
}

// downwardAPIFiles are the items' pod fields, resolved as for environment
// variables (fieldValue): labels and annotations as key="value" lines.
func (v *podVolumes) downwardAPIFiles(items []v1.DownwardAPIVolumeFile, def os.FileMode, ip netip.Addr) (map[string]volumeFile, error) {
	in := envInput{pod: v.pod, hostIP: v.hostIP}
	if ip.IsValid() {
		in.podIP = ip.String()
	}
	files := map[string]volumeFile{}
	for _, it := range items {
		if err := validRelPath(it.Path); err != nil {
			return nil, err
		}
		if it.FieldRef == nil {
			return nil, fmt.Errorf("downward API file %s: only fieldRef is supported by svcnet", it.Path)
		}
		val, err := fieldValue(in, it.FieldRef.FieldPath)
		if err != nil {
			return nil, fmt.Errorf("downward API file %s: %w", it.Path, err)
		}
		files[it.Path] = volumeFile{data: []byte(val), mode: fileMode(it.Mode, def)}
	}
	return files, nil
}

// tokenFiles is the file of a serviceAccountToken source: the pod's token,
// requested if the pod has none that is still fresh.
func (v *podVolumes) tokenFiles(ctx context.Context, vdir string, src v1.ServiceAccountTokenProjection, mode os.FileMode) (map[string]volumeFile, error) {
	if err := validRelPath(src.Path); err != nil {
		return nil, err
	}
	path := filepath.Join(vdir, src.Path)
	v.mu.Lock()
	t := v.tokens[path]
	if t == nil {
		t = &podToken{path: path, mode: mode, source: src}
		v.tokens[path] = t
	}
	tok := t.token
	fresh := tok != "" && time.Now().Before(t.refreshAt)
	v.mu.Unlock()
	if !fresh {
		var err error
		var refreshAt time.Time
		if tok, refreshAt, err = v.requestToken(ctx, src); err != nil {
			return nil, err
		}
		v.mu.Lock()
		t.token, t.refreshAt, t.failures, t.written = tok, refreshAt, 0, false
		v.mu.Unlock()
	}
	return map[string]volumeFile{src.Path: {data: []byte(tok), mode: mode}}, nil
}

// requestToken asks the API for a token of the pod's service account bound
// to the pod, as the kubelet does (the Node authorizer lets a node do so
// for the pods bound to it), and returns it with its refresh time.
func (v *podVolumes) requestToken(ctx context.Context, src v1.ServiceAccountTokenProjection) (string, time.Time, error) {
	sa := v.pod.Spec.ServiceAccountName
	if sa == "" {
		return "", time.Time{}, errors.New("failed to fetch token: the pod has no serviceAccountName")
	}
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: src.ExpirationSeconds,
		BoundObjectRef:    &authenticationv1.BoundObjectReference{APIVersion: "v1", Kind: "Pod", Name: v.pod.Name, UID: v.pod.UID},
	}}
	if src.Audience != "" {
		tr.Spec.Audiences = []string{src.Audience}
	}
	out, err := v.client.CoreV1().ServiceAccounts(v.pod.Namespace).CreateToken(ctx, sa, tr, metav1.CreateOptions{})
	if err != nil {
		return "", time.Time{}, fmt.Errorf("failed to fetch token: %w", err)
	}
	issued := time.Now()
	if out.Status.Token == "" {
		return "", time.Time{}, fmt.Errorf("failed to fetch token: the API returned no token for service account %s/%s", v.pod.Namespace, sa)
	}
	return out.Status.Token, tokenRefreshAt(issued, out.Status.ExpirationTimestamp.Time), nil
}

// nextRefresh is the earliest refresh time of the pod's tokens (now for
// a token not written, unless writing it failed); ok is false when the
// pod has none.
func (v *podVolumes) nextRefresh() (next time.Time, ok bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, t := range v.tokens {
		at := t.refreshAt
		if !t.written && t.failures == 0 {
			at = time.Time{}
		}
		if !ok || at.Before(next) {
			next, ok = at, true
		}
	}
	return next, ok
}

// refreshTokens keeps the pod's token files fresh until ctx ends (the
// worker ends it once the pod's containers have stopped): each is replaced
// when tokenRefreshAt says so, by a write to a temporary file of the same
// directory renamed over it, so that a reader never sees a partial token.
// A failed request is tried again after tokenRetryDelay.
func (v *podVolumes) refreshTokens(ctx context.Context) {
	for {
		next, ok := v.nextRefresh()
		if !ok {
			return
		}
		t := time.NewTimer(time.Until(next))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		v.refreshDue(ctx)
	}
}

// refreshDue replaces the tokens whose refresh time has come, and writes
// those still fresh that their file lacks.
func (v *podVolumes) refreshDue(ctx context.Context) {
	now := time.Now()
	type job struct {
		t      *podToken
		cached string // a fresh token to write; empty: request one
	}
	v.mu.Lock()
	var jobs []job
	for _, t := range v.tokens {
		switch {
		case !now.Before(t.refreshAt):
			jobs = append(jobs, job{t: t})
		case !t.written && t.failures == 0:
			jobs = append(jobs, job{t: t, cached: t.token})
		}
	}
	v.mu.Unlock()
	for _, j := range jobs {
		t := j.t
		tok, refreshAt, err := j.cached, time.Time{}, error(nil)
		if tok == "" {
			tok, refreshAt, err = v.requestToken(ctx, t.source)
		}
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			err = writeFileAtomic(t.path, []byte(tok), t.mode)
		}
		v.mu.Lock()
		switch {
		case err != nil:
			t.failures++
			t.refreshAt = time.Now().Add(tokenRetryDelay(t.failures))
		case j.cached != "":
			t.written = true
		default:
			t.token, t.refreshAt, t.failures, t.written = tok, refreshAt, 0, true
		}
		failures, next := t.failures, t.refreshAt
		v.mu.Unlock()
		if err != nil {
			v.log.Warn("service account token refresh failed", "pod", v.pod.Namespace+"/"+v.pod.Name, "file", t.path, "failures", failures, "err", err)
		} else {
			v.log.Debug("service account token refreshed", "pod", v.pod.Namespace+"/"+v.pod.Name, "file", t.path, "next", next)
		}
	}
}

// podMounts are the bind mounts of the pod's (init and app) containers'
// volumeMounts, for a pod whose directory is dir, sorted by target. Containers share the
// pod's mount namespace: two that mount the same volume path at one
// target share the mount (read-only only if both ask for it), two that
// mount different ones there are an error. skipped names the volumes of a
// type svcnet does not mount.
func podMounts(pod *v1.Pod, dir string) (mounts []sandbox.Mount, skipped []string, err error) {
	vols := map[string]*v1.Volume{}
	for i := range pod.Spec.Volumes {
		vols[pod.Spec.Volumes[i].Name] = &pod.Spec.Volumes[i]
	}
	byTarget := map[string]int{}
	owner := map[string]string{}
	for _, c := range allContainers(pod) {
		for _, vm := range c.VolumeMounts {
			fail := func(format string, args ...any) error {
				return &mountError{volume: vm.Name, err: fmt.Errorf("container %s: "+format, append([]any{c.Name}, args...)...)}
			}
			vol := vols[vm.Name]
			switch {
			case vol == nil:
				return nil, nil, fail("no volume %q in the pod", vm.Name)
			case !mountable(vol):
				if !slices.Contains(skipped, vm.Name) {
					skipped = append(skipped, vm.Name)
				}
				continue
			case vm.SubPathExpr != "":
				return nil, nil, fail("subPathExpr is not supported by svcnet")
			}
			target := filepath.Clean(vm.MountPath)
			if !filepath.IsAbs(target) || target == "/" {
				return nil, nil, fail("mountPath %q: need an absolute path other than /", vm.MountPath)
			}
			vdir := filepath.Join(dir, volumesDir, vol.Name)
			if vol.HostPath != nil {
				vdir = filepath.Clean(vol.HostPath.Path)
			}
			src := vdir
			if vm.SubPath != "" {
				if err := validRelPath(vm.SubPath); err != nil {
					return nil, nil, fail("subPath: %v", err)
				}
				src = filepath.Join(vdir, vm.SubPath)
				if !insideVolume(vdir, src) {
					return nil, nil, fail("subPath %q leads out of the volume", vm.SubPath)
				}
			}
			if i, ok := byTarget[target]; ok {
				if mounts[i].Source != src {
					return nil, nil, fail("mountPath %s is also a mount of container %s: a pod's containers share one mount namespace in svcnet", target, owner[target])
				}
				mounts[i].ReadOnly = mounts[i].ReadOnly && vm.ReadOnly
				continue
			}
			byTarget[target], owner[target] = len(mounts), c.Name
			mounts = append(mounts, sandbox.Mount{Source: src, Target: target, ReadOnly: vm.ReadOnly})
		}
	}
	slices.SortFunc(mounts, func(a, b sandbox.Mount) int { return strings.Compare(a.Target, b.Target) })
	return mounts, skipped, nil
}

// insideVolume tells whether path, a subPath of the volume vdir, stays in
// it as far as it exists: a symlink in the volume (an emptyDir the pod
// wrote) must not lead the mount, or the directory made for a missing
// subPath, out of it.
func insideVolume(vdir, path string) bool {
	base, err := filepath.EvalSymlinks(vdir)
	if err != nil {
		return true // not written yet: nothing of the pod's in it
	}
	for p := path; len(p) > len(vdir); p = filepath.Dir(p) {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			return real == base || strings.HasPrefix(real, base+"/")
		}
	}
	return true
}

// mountable tells whether svcnet sets up and mounts the volume's type.
func mountable(vol *v1.Volume) bool {
	s := vol.VolumeSource
	return s.EmptyDir != nil || s.ConfigMap != nil || s.Secret != nil || s.DownwardAPI != nil || s.Projected != nil || s.HostPath != nil
}

// checkHostPath is the kubelet's hostPath type check: DirectoryOrCreate
// and FileOrCreate make a missing path (0755 directories, an empty 0644
// file), the other types require what they name; without a type a missing
// path becomes a directory, as container runtimes make a missing bind
// mount source.
func checkHostPath(hp *v1.HostPathVolumeSource) error {
	p := filepath.Clean(hp.Path)
	if !filepath.IsAbs(p) {
		return fmt.Errorf("hostPath %q is not an absolute path", hp.Path)
	}
	typ := v1.HostPathUnset
	if hp.Type != nil {
		typ = *hp.Type
	}
	fi, err := os.Stat(p)
	exists := err == nil
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("hostPath type check failed: %w", err)
	}
	fail := func(what string) error { return fmt.Errorf("hostPath type check failed: %s is not %s", p, what) }
	switch typ {
	case v1.HostPathUnset, v1.HostPathDirectoryOrCreate:
		if !exists {
			return os.MkdirAll(p, 0o755)
		}
		if typ == v1.HostPathDirectoryOrCreate && !fi.IsDir() {
			return fail("a directory")
		}
	case v1.HostPathDirectory:
		if !exists || !fi.IsDir() {
			return fail("a directory")
		}
	case v1.HostPathFileOrCreate:
		if !exists {
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return err
			}
			f, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
			if err != nil {
				return err
			}
			return f.Close()
		}
		if !fi.Mode().IsRegular() {
			return fail("a file")
		}
	case v1.HostPathFile:
		if !exists || !fi.Mode().IsRegular() {
			return fail("a file")
		}
	case v1.HostPathSocket:
		if !exists || fi.Mode()&os.ModeSocket == 0 {
			return fail("a socket file")
		}
	case v1.HostPathCharDev:
		if !exists || fi.Mode()&os.ModeCharDevice == 0 {
			return fail("a character device")
		}
	case v1.HostPathBlockDev:
		if !exists || fi.Mode()&os.ModeDevice == 0 || fi.Mode()&os.ModeCharDevice != 0 {
			return fail("a block device")
		}
	default:
		return fmt.Errorf("hostPath type %q is not supported", typ)
	}
	return nil
}

// fileMode is m (a defaultMode or mode of the API, 0644 is 420) or def.
func fileMode(m *int32, def os.FileMode) os.FileMode {
	if m == nil {
		return def
	}
	return os.FileMode(*m) & os.ModePerm
}

// validVolumeName refuses a volume name that is not one directory name
// (the API validates it; a static pod's manifest is not).
func validVolumeName(name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") {
		return fmt.Errorf("invalid volume name %q", name)
	}
	return nil
}

// validRelPath refuses a file path or subPath that is absolute or leaves
// its volume (as the API does; a static pod's manifest is not validated).
func validRelPath(p string) error {
	if p == "" || filepath.IsAbs(p) || strings.ContainsRune(p, 0) {
		return fmt.Errorf("invalid path %q: must be relative", p)
	}
	for _, el := range strings.Split(p, "/") {
		if el == ".." {
			return fmt.Errorf("invalid path %q: must not contain '..'", p)
		}
	}
	if strings.HasPrefix(p, "..") {
		return fmt.Errorf("invalid path %q: must not start with '..'", p)
	}
	return nil
}

// writeVolume writes files (path relative to vdir → content) into vdir,
// each replaced atomically; a file that already holds its content and mode
// is left as it is. The files of prev (the volume's last write) that files
// lacks are removed.
func writeVolume(vdir string, files map[string]volumeFile, prev map[string]bool) error {
	if err := os.MkdirAll(vdir, 0o755); err != nil {
		return err
	}
	for _, rel := range slices.Sorted(maps.Keys(files)) {
		p := filepath.Join(vdir, rel)
		f := files[rel]
		if fi, err := os.Lstat(p); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm() == f.mode.Perm() {
			if b, err := os.ReadFile(p); err == nil && string(b) == string(f.data) {
				continue
			}
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := writeFileAtomic(p, f.data, f.mode); err != nil {
			return err
		}
	}
	for rel := range prev {
		if _, ok := files[rel]; !ok {
			if err := os.Remove(filepath.Join(vdir, rel)); err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
		}
	}
	return nil
}

// writeFileAtomic replaces path with data and mode through a temporary file
// of the same directory, so a reader sees the old content or the new one.
func writeFileAtomic(path string, data []byte, mode os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(mode) // exactly mode, whatever the umask
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		_ = os.Remove(f.Name())
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
