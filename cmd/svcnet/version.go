package main

import (
	"context"
	"fmt"

	"github.com/svcnet/svcnet/internal/version"
)

func init() {
	register(command{
		name:  "version",
		short: "print svcnet's version and the Kubernetes API level it implements",
		run: func(ctx context.Context, args []string) error {
			fs := newFlagSet("version")
			if err := fs.Parse(args); err != nil {
				return err
			}
			fmt.Printf("svcnet %s (Kubernetes API %s)\n", version.Version, version.KubernetesGitVersion)
			return nil
		},
	})
}
