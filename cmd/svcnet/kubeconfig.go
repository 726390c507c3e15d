package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/svcnet/svcnet/apiserver"
)

func init() {
	register(command{name: "kubeconfig", short: "issue a kubeconfig for a user and groups (client certificate from the cluster CA)", run: runKubeconfig})
}

// runKubeconfig writes a kubeconfig for --user in --group(s), with a new
// client certificate signed by the CA under --data-dir. The server is taken
// from --server or from the admin kubeconfig next to the CA. What the user
// may do is up to RBAC: a new user can do nothing but discovery until bound.
func runKubeconfig(_ context.Context, args []string) error {
	fs := newFlagSet("kubeconfig")
	dataDir := fs.String("data-dir", "/var/lib/svcnet", "data directory of svcnet up (its apiserver/ is used) or of svcnet apiserver")
	user := fs.String("user", "", "user name (the certificate's common name); required")
	groups := fs.StringSlice("group", nil, "group (the certificate's organization); repeatable")
	server := fs.String("server", "", "API server URL (default: the one in the data directory's admin kubeconfig)")
	out := fs.StringP("output", "o", "", "file to write (default: standard output)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *user == "" {
		return fmt.Errorf("--user is required")
	}
	apiDir := *dataDir
	if _, err := os.Stat(filepath.Join(apiDir, "apiserver", "pki", "ca.crt")); err == nil {
		apiDir = filepath.Join(apiDir, "apiserver") // svcnet up's layout
	}
	if _, err := os.Stat(filepath.Join(apiDir, "pki", "ca.crt")); err != nil {
		return fmt.Errorf("no cluster CA under %s: %w", apiDir, err)
	}
	if *server == "" {
		// svcnet up's kubeconfig reaches the apiserver on the bridge; the
		// apiserver's own one on its bind address.
		for _, p := range []string{filepath.Join(*dataDir, "kubeconfig"), filepath.Join(apiDir, "kubeconfig")} {
			if kc, err := clientcmd.LoadFromFile(p); err == nil {
				if ctx, ok := kc.Contexts[kc.CurrentContext]; ok && kc.Clusters[ctx.Cluster] != nil {
					*server = kc.Clusters[ctx.Cluster].Server
					break
				}
			}
		}
		if *server == "" {
			return fmt.Errorf("no admin kubeconfig under %s to take the server from: pass --server", *dataDir)
		}
	}
	path := *out
	if path == "" {
		f, err := os.CreateTemp("", "svcnet-kubeconfig-*")
		if err != nil {
			return err
		}
		f.Close()
		path = f.Name()
		defer os.Remove(path)
	}
	if err := apiserver.WriteClientKubeconfig(apiDir, path, *server, *user, *groups); err != nil {
		return err
	}
	if *out == "" {
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		_, err = os.Stdout.Write(data)
		return err
	}
	return nil
}
