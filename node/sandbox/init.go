package sandbox

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/pflag"
	"golang.org/x/sys/unix"
)

// InitMain is the infra process: it runs in the pod's fresh UTS and mount
// namespaces (and its network namespace), sets the hostname, makes the
// mount tree private so nothing leaks back to the node, bind-mounts each
// --bind SRC:DST (creating DST if it is missing: an empty file for a file,
// a directory for a directory), prints "ready" and waits for a signal.
func InitMain(args []string) error {
	fs := pflag.NewFlagSet("sandbox-init", pflag.ContinueOnError)
	hostname := fs.String("hostname", "", "pod hostname")
	binds := fs.StringArray("bind", nil, "SRC:DST bind mount")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *hostname != "" {
		if err := unix.Sethostname([]byte(*hostname)); err != nil {
			return fmt.Errorf("sethostname: %w", err)
		}
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make mounts private: %w", err)
	}
	for _, b := range *binds {
		src, dst, ok := strings.Cut(b, ":")
		if !ok {
			return fmt.Errorf("bad --bind %q", b)
		}
		if err := bindMount(src, dst); err != nil {
			return err
		}
	}
	fmt.Println("ready")
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
	return nil
}

func bindMount(src, dst string) error {
	fi, err := os.Stat(src)
	if err != nil {
		return fmt.Errorf("bind %s: %w", src, err)
	}
	// /etc/resolv.conf may be a symlink (systemd-resolved); mounting over it
	// would follow it into a path shared with the node, so the link target
	// is what gets covered, which is still private to this mount namespace.
	if _, err := os.Stat(dst); errors.Is(err, os.ErrNotExist) {
		if fi.IsDir() {
			err = os.MkdirAll(dst, 0o755)
		} else {
			var f *os.File
			f, err = os.OpenFile(dst, os.O_CREATE|os.O_WRONLY, 0o644)
			if err == nil {
				f.Close()
			}
		}
		if err != nil {
			return fmt.Errorf("create mount point %s: %w", dst, err)
		}
	}
	if err := unix.Mount(src, dst, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind %s on %s: %w", src, dst, err)
	}
	return nil
}
