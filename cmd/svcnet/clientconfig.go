package main

import (
	"fmt"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// clientConfig is how every svcnet component finds its API server: the
// kubeconfig file named by --kubeconfig, else the in-cluster configuration
// of a pod, else $KUBECONFIG or ~/.kube/config as kubectl finds them.
func clientConfig(kubeconfig, userAgent string) (*rest.Config, error) {
	var cfg *rest.Config
	var err error
	if kubeconfig != "" {
		cfg, err = clientcmd.BuildConfigFromFlags("", kubeconfig)
	} else if cfg, err = rest.InClusterConfig(); err != nil {
		rules := clientcmd.NewDefaultClientConfigLoadingRules()
		cfg, err = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	}
	if err != nil {
		return nil, fmt.Errorf("kubernetes client config: %w", err)
	}
	cfg.UserAgent = userAgent
	return cfg, nil
}

// typedClient is a clientset of clientConfig that speaks protobuf, as
// kube-proxy's and CoreDNS's clients do (the initial lists of Services and
// EndpointSlices decode with far less garbage than JSON; JSON stays
// acceptable for servers without protobuf), with the given rate limits.
func typedClient(kubeconfig, userAgent string, qps float32, burst int) (kubernetes.Interface, error) {
	cfg, err := clientConfig(kubeconfig, userAgent)
	if err != nil {
		return nil, err
	}
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	cfg.QPS, cfg.Burst = qps, burst
	return kubernetes.NewForConfig(cfg)
}
