package sandbox

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/spf13/pflag"
	"golang.org/x/sys/unix"
)

// bind is one --bind or --bind-ro of the infra process.
type bind struct {
	src, dst string
	readOnly bool
}

// bindFlag is a repeatable SRC:DST flag. --bind and --bind-ro append to
// one list, so that the mounts are made in command-line order (a parent
// directory before what is mounted inside it).
type bindFlag struct {
	list     *[]bind
	readOnly bool
}

func (f *bindFlag) String() string { return "" }
func (f *bindFlag) Type() string   { return "SRC:DST" }
func (f *bindFlag) Set(s string) error {
	src, dst, ok := strings.Cut(s, ":")
	if !ok || src == "" || dst == "" {
		return fmt.Errorf("bad bind %q: want SRC:DST", s)
	}
	*f.list = append(*f.list, bind{src: src, dst: dst, readOnly: f.readOnly})
	return nil
}

// InitMain is the infra process: it runs in the pod's fresh UTS and mount
// namespaces (and its network namespace, or the node's for a host-network
// pod), sets the hostname, makes the mount tree private so nothing leaks
// back to the node, bind-mounts each --bind SRC:DST and --bind-ro SRC:DST
// (read-only) in order, creating DST if it is missing (an empty file for a
// file, a directory for a directory), prints "ready" and waits for a
// signal. --pod-dir names the pod's directory in the command line, by
// which a restarted agent recognises the process.
func InitMain(args []string) error {
	fs := pflag.NewFlagSet("sandbox-init", pflag.ContinueOnError)
	hostname := fs.String("hostname", "", "pod hostname")
	var binds []bind
	fs.Var(&bindFlag{list: &binds}, "bind", "SRC:DST bind mount")
	fs.Var(&bindFlag{list: &binds, readOnly: true}, "bind-ro", "SRC:DST read-only bind mount")
	fs.String("pod-dir", "", "the pod's directory (identifies the process)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	// Everything below changes the mount namespace the process is in: were
	// it the node's (a caller that forgot to unshare it), the node's mounts
	// would turn private and the pod's binds would cover the node's files.
	if err := ownMountNamespace(); err != nil {
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
	for _, b := range binds {
		if err := bindMount(b); err != nil {
			return err
		}
	}
	fmt.Println("ready")
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
	return nil
}

// ownMountNamespace fails unless the process's mount namespace differs
// from its parent's (the node agent, which started it with `ip netns exec`
// or a clone with CLONE_NEWNS).
func ownMountNamespace() error {
	self, err := os.Readlink("/proc/self/ns/mnt")
	if err != nil {
		return fmt.Errorf("mount namespace: %w", err)
	}
	parent, err := os.Readlink("/proc/" + strconv.Itoa(os.Getppid()) + "/ns/mnt")
	if err != nil {
		return fmt.Errorf("mount namespace of the parent: %w", err)
	}
	if self == parent {
		return errors.New("sandbox-init: the process shares its parent's mount namespace; refusing to mount anything")
	}
	return nil
}

func bindMount(b bind) error {
	src, dst := b.src, b.dst
	fi, err := os.Stat(src)
	if err != nil {
		return fmt.Errorf("bind %s: %w", src, err)
	}
	// /etc/resolv.conf may be a symlink (systemd-resolved); mounting over it
	// would follow it into a path shared with the node, so the link target
	// is what gets covered, which is still private to this mount namespace.
	// A missing mount point is created on the node's filesystem (mkdir is
	// not namespaced): an empty directory or file, left in place afterwards
	// (other pods may be mounted on it).
	if _, err := os.Stat(dst); errors.Is(err, os.ErrNotExist) {
		if fi.IsDir() {
			err = os.MkdirAll(dst, 0o755)
		} else if err = os.MkdirAll(filepath.Dir(dst), 0o755); err == nil {
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
	if b.readOnly {
		// A bind mount takes its flags from a remount of itself.
		if err := unix.Mount("", dst, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
			return fmt.Errorf("make %s read-only: %w", dst, err)
		}
	}
	return nil
}
