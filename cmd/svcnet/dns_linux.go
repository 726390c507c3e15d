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
// executable mapped so far may go (MADV_PAGEOUT), then unmaps them from
// this process (MADV_DONTNEED). The svcnet binary carries every subcommand,
// and starting it touches code and type data of all of them; svcnet dns
// and svcnet proxy then run a small part. These are clean, never-written
// file pages, so nothing is lost: what the process uses comes back on its
// next access (from the page cache), the rest stops counting in the
// resident set. MADV_PAGEOUT alone skips pages another process maps too,
// and on a node every svcnet component runs from the same binary (the
// apiserver, the controllers, DNS, the proxy), so without MADV_DONTNEED
// nothing would leave the resident set there. It returns the bytes
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
		_, _, errPageOut := unix.Syscall(unix.SYS_MADVISE, uintptr(start), uintptr(end-start), unix.MADV_PAGEOUT)
		_, _, errDontNeed := unix.Syscall(unix.SYS_MADVISE, uintptr(start), uintptr(end-start), unix.MADV_DONTNEED)
		if errPageOut == 0 || errDontNeed == 0 {
			total += int64(end - start)
		}
	}
	return total
}
