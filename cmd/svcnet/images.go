package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/svcnet/svcnet/node/images"
)

func init() {
	register(command{
		name:  "images",
		short: "list the images svcnet runs without a registry",
		run:   runImages,
	})
}

func runImages(_ context.Context, args []string) error {
	fs := newFlagSet("images")
	if err := fs.Parse(args); err != nil {
		return err
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 8, 3, ' ', 0)
	fmt.Fprintln(w, "IMAGE\tPORTS\tDESCRIPTION")
	for _, b := range images.Builtins() {
		ports := make([]string, len(b.Ports))
		for i, p := range b.Ports {
			ports[i] = strconv.Itoa(int(p)) + "/TCP"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\n", b.Image, strings.Join(ports, ","), b.Description)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	fmt.Println("\nAny other image needs a command; it then runs from the node's filesystem.")
	return nil
}
