// Package version holds svcnet's own version and the Kubernetes release whose
// API behaviour svcnet implements. The apiserver's /version reports the
// Kubernetes values so that version-sensitive clients (kubectl's dispatcher,
// client-go feature gates) treat svcnet as that release.
package version

// Version is svcnet's own version; overridden at link time with
// -ldflags "-X github.com/svcnet/svcnet/internal/version.Version=...".
var Version = "v0.1.0-dev"

const (
	// KubernetesMajor and KubernetesMinor are the API level svcnet matches.
	KubernetesMajor = "1"
	KubernetesMinor = "37"
	// KubernetesGitVersion is what /version reports as gitVersion.
	KubernetesGitVersion = "v1.37.2"
)
