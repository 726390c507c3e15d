//go:build linux

package main

import (
	"bufio"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// pageOutExecutable tells the kernel that the read-only pages of our own
// executable mapped so far may go (MADV_PAGEOUT). The svcnet binary carries
// every subcommand, and starting it touches code and type data of all of
// them; svcnet dns then runs a small part. These are clean file pages, so
// nothing is lost: what the DNS path uses comes back on its next access,
// the rest stops counting in the resident set. It returns the bytes
// advised; errors (old kernels) are ignored.
func pageOutExecutable() int64 {
	exe, err := os.Executable()
	if err != nil {
		return 0
	}
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return 0
	}
	defer f.Close()
	var total int64
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// 00400000-00452000 r-xp 00000000 08:02 173521 /usr/bin/x
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 || fields[5] != exe || strings.Contains(fields[1], "w") {
			continue
		}
		lo, hi, ok := strings.Cut(fields[0], "-")
		if !ok {
			continue
		}
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 != nil || err2 != nil || end <= start {
			continue
		}
		if _, _, errno := unix.Syscall(unix.SYS_MADVISE, uintptr(start), uintptr(end-start), unix.MADV_PAGEOUT); errno == 0 {
			total += int64(end - start)
		}
	}
	return total
}
