package cluster

import (
	"os/exec"
	"runtime"
	"sync"
	"syscall"
)

// spawn is the request channel of the thread that starts children.
var (
	spawnOnce sync.Once
	spawn     chan spawnReq
)

type spawnReq struct {
	cmd  *exec.Cmd
	errc chan error
}

// startLocked starts cmd with the parent-death signal SIGKILL, from an OS
// thread that lives as long as the process, so the signal fires when svcnet
// up exits and not when some runtime thread does.
func startLocked(cmd *exec.Cmd) error {
	spawnOnce.Do(func() {
		spawn = make(chan spawnReq)
		go func() {
			// Never unlocked and never returning: the thread stays.
			runtime.LockOSThread()
			for r := range spawn {
				r.errc <- r.cmd.Start()
			}
		}()
	})
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	errc := make(chan error, 1)
	spawn <- spawnReq{cmd: cmd, errc: errc}
	return <-errc
}
