// Package serviceaccount holds two controllers of kube-controller-manager
// that every pod's service account token depends on:
//
//   - the service account controller ("serviceaccount"): every active
//     namespace has the ServiceAccount "default" (made again when deleted),
//     which the ServiceAccount admission plugin gives pods that name none;
//   - the root CA publisher ("root-ca-cert-publisher"): every namespace has
//     the ConfigMap kube-root-ca.crt holding the cluster CA under ca.crt
//     (put back when deleted or changed), which each pod's token volume
//     projects next to the token so that in-cluster clients trust the API.
package serviceaccount

import (
	"context"
	"fmt"
	"log/slog"
	"maps"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/svcnet/svcnet/controller/internal/worker"
)

const (
	// DefaultName is the service account made in every namespace.
	DefaultName = "default"
	// RootCAConfigMap is the ConfigMap the publisher keeps in every namespace.
	RootCAConfigMap = "kube-root-ca.crt"
	// DescriptionAnnotation and Description are kube-controller-manager's
	// note on that ConfigMap.
	DescriptionAnnotation = "kubernetes.io/description"
	Description           = "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as the internal service IP or kubernetes.default.svc. " +
		"No other usage is guaranteed across distributions of Kubernetes clusters."
)

// Controller makes the default service account of every active namespace.
type Controller struct {
	client     kubernetes.Interface
	namespaces corelisters.NamespaceLister
	accounts   corelisters.ServiceAccountLister
	synced     []cache.InformerSynced
	queue      workqueue.TypedRateLimitingInterface[string]
	log        *slog.Logger
}

// New wires the service account controller to the factory's informers.
func New(client kubernetes.Interface, factory informers.SharedInformerFactory, log *slog.Logger) *Controller {
	if log == nil {
		log = slog.Default()
	}
	nsInf, saInf := factory.Core().V1().Namespaces(), factory.Core().V1().ServiceAccounts()
	c := &Controller{client: client, namespaces: nsInf.Lister(), accounts: saInf.Lister(),
		synced: []cache.InformerSynced{nsInf.Informer().HasSynced, saInf.Informer().HasSynced},
		queue:  worker.NewQueue("serviceaccount"), log: log.With("controller", "serviceaccount-controller")}
	nsInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.enqueueNamespace(obj) },
		UpdateFunc: func(_, obj any) { c.enqueueNamespace(obj) },
	})
	// A deleted default service account is made again.
	saInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{DeleteFunc: func(obj any) {
		if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		if sa, ok := obj.(*corev1.ServiceAccount); ok && sa.Name == DefaultName {
			c.queue.Add(sa.Namespace)
		}
	}})
	return c
}

func (c *Controller) enqueueNamespace(obj any) {
	if ns, ok := obj.(*corev1.Namespace); ok {
		c.queue.Add(ns.Name)
	}
}

// Run waits for the caches, then syncs until ctx is cancelled.
func (c *Controller) Run(ctx context.Context, workers int) error {
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return fmt.Errorf("serviceaccount-controller: caches did not sync")
	}
	worker.Run(ctx, c.log, c.queue, workers, c.sync)
	return nil
}

func (c *Controller) sync(ctx context.Context, name string) error {
	ns, err := c.namespaces.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if ns.Status.Phase != corev1.NamespaceActive {
		return nil // nothing is made in a terminating namespace
	}
	if _, err := c.accounts.ServiceAccounts(name).Get(DefaultName); err == nil || !apierrors.IsNotFound(err) {
		return err
	}
	_, err = c.client.CoreV1().ServiceAccounts(name).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: DefaultName}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) && !apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
		return err
	}
	return nil
}

// Publisher keeps kube-root-ca.crt in every namespace.
type Publisher struct {
	client     kubernetes.Interface
	rootCA     string
	configMaps corelisters.ConfigMapLister
	synced     []cache.InformerSynced
	queue      workqueue.TypedRateLimitingInterface[string]
	log        *slog.Logger
}

// NewPublisher wires the root CA publisher; rootCA is the PEM bundle
// (kube-controller-manager's --root-ca-file).
func NewPublisher(client kubernetes.Interface, factory informers.SharedInformerFactory, rootCA []byte, log *slog.Logger) (*Publisher, error) {
	if len(rootCA) == 0 {
		return nil, fmt.Errorf("root-ca-cert-publisher: no root CA")
	}
	if log == nil {
		log = slog.Default()
	}
	nsInf, cmInf := factory.Core().V1().Namespaces(), factory.Core().V1().ConfigMaps()
	p := &Publisher{client: client, rootCA: string(rootCA), configMaps: cmInf.Lister(),
		synced: []cache.InformerSynced{nsInf.Informer().HasSynced, cmInf.Informer().HasSynced},
		queue:  worker.NewQueue("root-ca-cert-publisher"), log: log.With("controller", "root-ca-cert-publisher")}
	nsInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if ns, ok := obj.(*corev1.Namespace); ok {
				p.queue.Add(ns.Name)
			}
		},
		UpdateFunc: func(_, obj any) {
			if ns, ok := obj.(*corev1.Namespace); ok && ns.Status.Phase == corev1.NamespaceActive {
				p.queue.Add(ns.Name)
			}
		},
	})
	cmChanged := func(obj any) {
		if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		if cm, ok := obj.(*corev1.ConfigMap); ok && cm.Name == RootCAConfigMap {
			p.queue.Add(cm.Namespace)
		}
	}
	cmInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, obj any) { cmChanged(obj) },
		DeleteFunc: cmChanged,
	})
	return p, nil
}

// Run waits for the caches, then syncs until ctx is cancelled.
func (p *Publisher) Run(ctx context.Context, workers int) error {
	if !cache.WaitForCacheSync(ctx.Done(), p.synced...) {
		return fmt.Errorf("root-ca-cert-publisher: caches did not sync")
	}
	worker.Run(ctx, p.log, p.queue, workers, p.sync)
	return nil
}

func (p *Publisher) sync(ctx context.Context, ns string) error {
	data := map[string]string{"ca.crt": p.rootCA}
	cm, err := p.configMaps.ConfigMaps(ns).Get(RootCAConfigMap)
	if apierrors.IsNotFound(err) {
		_, err = p.client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: RootCAConfigMap, Annotations: map[string]string{DescriptionAnnotation: Description}},
			Data:       data,
		}, metav1.CreateOptions{})
		// A namespace that is gone or terminating needs none.
		if apierrors.IsNotFound(err) || apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
			return nil
		}
		return err
	}
	if err != nil {
		return err
	}
	if maps.Equal(cm.Data, data) && cm.Annotations[DescriptionAnnotation] != "" {
		return nil
	}
	cm = cm.DeepCopy()
	cm.Data = data
	if cm.Annotations == nil {
		cm.Annotations = map[string]string{}
	}
	cm.Annotations[DescriptionAnnotation] = Description
	_, err = p.client.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{})
	return err
}
