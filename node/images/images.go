// Package images decides how svcnet runs a container without a container
// runtime or registry.
//
// There are no image layers: a container's command runs from the node's own
// filesystem. A few images used by the Kubernetes tutorials are built in, and
// run as `svcnet builtin <name>` inside the pod's namespaces:
//
//   - jocatalin/kubernetes-bootcamp:v1 and :v2 (also under docker.io/ and
//     gcr.io/google-samples/): an HTTP server on :8080 answering every request
//     with "Hello Kubernetes bootcamp! | Running on: <hostname> | v=<n>\n".
//   - nginx, any tag or digest (also docker.io/library/nginx): a static web
//     server on :80 serving /usr/share/nginx/html of the pod's own mount
//     namespace, so files written inside the pod are what it serves.
//
// A container that sets command runs that command, whatever its image. Any
// other image without a command cannot run; Resolve says why, and the node
// agent keeps the container waiting with that reason and message.
package images

import (
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// Builtin describes one image svcnet can run without a registry.
type Builtin struct {
	// Name is the argument of `svcnet builtin`.
	Name string
	// Image is the reference users write, as listed by `svcnet images`.
	Image string
	// Ports the built-in server listens on.
	Ports []int32
	// Description is one line for `svcnet images`.
	Description string
	// Args are the arguments after `svcnet builtin`.
	Args []string
}

// Builtins lists the built-in images in the order `svcnet images` prints.
func Builtins() []Builtin {
	return []Builtin{
		{Name: "bootcamp", Image: "jocatalin/kubernetes-bootcamp:v1", Ports: []int32{8080}, Args: []string{"bootcamp", "--version", "1"},
			Description: `HTTP on :8080, "Hello Kubernetes bootcamp! | Running on: <pod> | v=1"`},
		{Name: "bootcamp", Image: "jocatalin/kubernetes-bootcamp:v2", Ports: []int32{8080}, Args: []string{"bootcamp", "--version", "2"},
			Description: `HTTP on :8080, "Hello Kubernetes bootcamp! | Running on: <pod> | v=2"`},
		{Name: "nginx", Image: "nginx (any tag)", Ports: []int32{80}, Args: []string{"nginx", "--root", NginxRoot, "--listen", ":80"},
			Description: "static files on :80 from the pod's own " + NginxRoot},
	}
}

// NginxRoot is the document root of the built-in nginx, private to each pod.
const NginxRoot = "/usr/share/nginx/html"

// Reason is the waiting reason of a container whose image cannot run.
const Reason = "ErrImagePull"

// NotAvailableError says that an image is neither built in nor given a command.
type NotAvailableError struct{ Image string }

func (e *NotAvailableError) Error() string {
	return fmt.Sprintf("image %s is not available to svcnet; give the container a command or use a built-in image", e.Image)
}

// Ref is a parsed image reference.
type Ref struct {
	// Repository is the normalized repository without registry for Docker
	// Hub images ("library/nginx", "jocatalin/kubernetes-bootcamp"), or with
	// it for other registries ("gcr.io/google-samples/kubernetes-bootcamp").
	Repository string
	Tag        string // "latest" when neither tag nor digest is given
	Digest     string
}

// ParseRef parses an image reference the way Docker normalizes it.
func ParseRef(image string) (Ref, error) {
	s := strings.TrimSpace(image)
	if s == "" {
		return Ref{}, fmt.Errorf("empty image reference")
	}
	var r Ref
	if i := strings.Index(s, "@"); i >= 0 {
		r.Digest = s[i+1:]
		s = s[:i]
	}
	if i := strings.LastIndex(s, ":"); i >= 0 && !strings.Contains(s[i:], "/") {
		r.Tag = s[i+1:]
		s = s[:i]
	}
	if s == "" {
		return Ref{}, fmt.Errorf("invalid image reference %q", image)
	}
	parts := strings.SplitN(s, "/", 2)
	if len(parts) == 2 && (strings.ContainsAny(parts[0], ".:") || parts[0] == "localhost") {
		if parts[0] == "docker.io" || parts[0] == "index.docker.io" || parts[0] == "registry-1.docker.io" {
			s = parts[1]
		}
	}
	if !strings.Contains(s, "/") {
		s = "library/" + s
	}
	r.Repository = s
	if r.Tag == "" && r.Digest == "" {
		r.Tag = "latest"
	}
	return r, nil
}

// Plan is how one container runs.
type Plan struct {
	// Builtin is set when a built-in server runs; Args are then the
	// arguments of `svcnet builtin`.
	Builtin *Builtin
	// Argv is the program and arguments to run from the node's filesystem
	// when Builtin is nil.
	Argv []string
}

// Resolve decides how container c runs. An explicit command always wins
// (with args appended, as a container runtime does when both are set). A
// container with only args and no command runs a built-in image with those
// args ignored. The error is a *NotAvailableError when the image can't run.
func Resolve(c *v1.Container) (Plan, error) {
	if len(c.Command) > 0 {
		return Plan{Argv: append(append([]string(nil), c.Command...), c.Args...)}, nil
	}
	if b := Lookup(c.Image); b != nil {
		return Plan{Builtin: b}, nil
	}
	return Plan{}, &NotAvailableError{Image: c.Image}
}

// Lookup returns the built-in behind image, or nil.
func Lookup(image string) *Builtin {
	r, err := ParseRef(image)
	if err != nil {
		return nil
	}
	all := Builtins()
	switch r.Repository {
	case "library/nginx":
		return &all[2]
	case "jocatalin/kubernetes-bootcamp", "gcr.io/google-samples/kubernetes-bootcamp":
		switch r.Tag {
		case "v1":
			return &all[0]
		case "v2":
			return &all[1]
		}
	}
	return nil
}
