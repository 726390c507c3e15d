// Package metallbstate keeps a MetalLB ConfigurationState object
// (metallb.io/v1beta1, MetalLB v0.16) up to date for one svcnet component:
// `svcnet controllers`' lbipam writes "controller" with the condition
// poolReconcilerValid, each speaker "speaker-<node>" with
// configReconcilerValid, in the MetalLB namespace, as MetalLB's controller
// and speakers do. status.result is Valid while the component could use
// every object of the configuration, Invalid (errorSummary: what it could
// not use) otherwise, so that `kubectl get configurationstates -n
// metallb-system` tells whether the configuration took.
package metallbstate

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	metallbv1beta1 "github.com/svcnet/svcnet/apis/metallb/v1beta1"
)

// Condition types and reasons, as MetalLB names them.
const (
	ConditionConfigReconcilerValid = "configReconcilerValid"
	ConditionPoolReconcilerValid   = "poolReconcilerValid"
	ReasonReconciled               = "Reconciled"
	ReasonConfigurationError       = "ConfigurationError"
)

// Reporter writes one ConfigurationState. Set records what a part of the
// component could not use; Run writes the object whenever that changes.
// A nil Reporter does nothing.
type Reporter struct {
	dyn       dynamic.Interface
	namespace string
	name      string
	labels    map[string]string
	condition string
	log       *slog.Logger

	mu      sync.Mutex
	parts   map[string][]string
	version int
	kick    chan struct{}
}

// ForController is the reporter of MetalLB's controller role.
func ForController(dyn dynamic.Interface, namespace string, log *slog.Logger) *Reporter {
	return newReporter(dyn, namespace, "controller", map[string]string{"metallb.io/component-type": "controller"}, ConditionPoolReconcilerValid, log)
}

// ForSpeaker is the reporter of node's speaker.
func ForSpeaker(dyn dynamic.Interface, namespace, node string, log *slog.Logger) *Reporter {
	return newReporter(dyn, namespace, "speaker-"+node,
		map[string]string{"metallb.io/component-type": "speaker", "metallb.io/node-name": node}, ConditionConfigReconcilerValid, log)
}

func newReporter(dyn dynamic.Interface, namespace, name string, labels map[string]string, condition string, log *slog.Logger) *Reporter {
	if log == nil {
		log = slog.Default()
	}
	return &Reporter{dyn: dyn, namespace: namespace, name: name, labels: labels, condition: condition, log: log,
		parts: map[string][]string{}, kick: make(chan struct{}, 1)}
}

// Set records the problems of one part of the configuration (none: it
// loaded whole).
func (r *Reporter) Set(part string, problems []string) {
	if r == nil {
		return
	}
	r.mu.Lock()
	old, seen := r.parts[part]
	if !seen || !slices.Equal(old, problems) {
		r.parts[part] = slices.Clone(problems)
		r.version++
	}
	r.mu.Unlock()
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// Run writes the object after each change until ctx ends, retrying
// failed writes every few seconds.
func (r *Reporter) Run(ctx context.Context) {
	if r == nil {
		return
	}
	written := 0
	retry := time.NewTicker(5 * time.Second)
	defer retry.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.kick:
		case <-retry.C:
		}
		r.mu.Lock()
		v := r.version
		var problems []string
		for _, part := range slices.Sorted(maps.Keys(r.parts)) {
			problems = append(problems, r.parts[part]...)
		}
		seen := len(r.parts) > 0
		r.mu.Unlock()
		if !seen || v == written {
			continue
		}
		if err := r.write(ctx, problems); err != nil {
			if apierrors.IsNotFound(err) {
				// The MetalLB namespace does not exist (yet): nothing to report into.
				r.log.Debug("no namespace for ConfigurationState", "name", r.namespace+"/"+r.name, "err", err)
			} else if ctx.Err() == nil {
				r.log.Warn("write ConfigurationState", "name", r.namespace+"/"+r.name, "err", err)
			}
			continue
		}
		written = v
	}
}

func (r *Reporter) write(ctx context.Context, problems []string) error {
	res := r.dyn.Resource(metallbv1beta1.ConfigurationStatesResource).Namespace(r.namespace)
	cur, err := res.Get(ctx, r.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": metallbv1beta1.SchemeGroupVersion.String(), "kind": "ConfigurationState",
			"metadata": map[string]any{"name": r.name, "namespace": r.namespace},
		}}
		u.SetLabels(r.labels)
		cur, err = res.Create(ctx, u, metav1.CreateOptions{})
	}
	if err != nil {
		return err
	}
	if l := cur.GetLabels(); !maps.Equal(l, mergeLabels(l, r.labels)) {
		cur.SetLabels(mergeLabels(l, r.labels))
		if cur, err = res.Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
			return err
		}
	}
	cond := map[string]any{"type": r.condition, "status": "True", "reason": ReasonReconciled, "message": "",
		"lastTransitionTime": time.Now().UTC().Format(time.RFC3339)}
	if len(problems) > 0 {
		cond["status"], cond["reason"], cond["message"] = "False", ReasonConfigurationError, strings.Join(problems, "\n")
	}
	conds, _, _ := unstructured.NestedSlice(cur.Object, "status", "conditions")
	conds = slices.DeleteFunc(conds, func(c any) bool {
		m, ok := c.(map[string]any)
		return ok && m["type"] == r.condition
	})
	conds = append(conds, cond)
	result, summary := "Valid", []string{}
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["status"] == "False" && m["reason"] == ReasonConfigurationError {
			result = "Invalid"
			summary = append(summary, fmt.Sprint(m["message"]))
		}
	}
	status := map[string]any{"result": result, "conditions": conds}
	if len(summary) > 0 {
		status["errorSummary"] = strings.Join(summary, "\n")
	}
	cur.Object["status"] = status
	_, err = res.UpdateStatus(ctx, cur, metav1.UpdateOptions{})
	return err
}

func mergeLabels(have, want map[string]string) map[string]string {
	out := maps.Clone(have)
	if out == nil {
		out = map[string]string{}
	}
	maps.Copy(out, want)
	return out
}
