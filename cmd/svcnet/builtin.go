package main

import (
	"context"
	"fmt"
	"os"

	"github.com/svcnet/svcnet/node/images"
)

// builtin runs one of the built-in image servers. The node agent starts it
// inside a pod's namespaces as the container's process.
func init() {
	register(command{
		name:  "builtin",
		short: "run a built-in image server (bootcamp, nginx) in the foreground",
		run:   runBuiltin,
	})
}

func runBuiltin(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("usage: svcnet builtin bootcamp|nginx [flags]")
	}
	fs := newFlagSet("builtin " + args[0])
	switch args[0] {
	case "bootcamp":
		version := fs.String("version", "1", "version reported in the answer (v=N)")
		listen := fs.String("listen", ":8080", "listen address")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		return images.ServeBootcamp(ctx, *listen, *version, os.Stdout)
	case "nginx":
		root := fs.String("root", images.NginxRoot, "document root")
		listen := fs.String("listen", ":80", "listen address")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		return images.ServeNginx(ctx, *listen, *root, os.Stdout)
	default:
		return fmt.Errorf("unknown built-in %q (known: bootcamp, nginx)", args[0])
	}
}
