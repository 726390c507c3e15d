// Package vmtest runs svcnet's IPVS mode against a real IPVS kernel.
//
// The machines svcnet is developed and tested on have no ip_vs and cannot
// load modules, so TestIPVSInVM boots Debian's distribution kernel
// (package linux-image-amd64, downloaded with `apt-get download` into a
// cache directory and unpacked with dpkg-deb, never installed) under
// qemu-system-x86_64 with software emulation and no network device. The
// initramfs is written by the test itself (newc cpio, gzip): the guest
// program (./guest, built with CGO_ENABLED=0) as /init, the kernel modules
// it needs with their dependencies (read from each module's .modinfo), and
// ip, ipvsadm, ipset, iptables-legacy and busybox with their shared
// libraries. The guest programs a node namespace (a bridge with two
// backend pods in hairpin mode, a client behind a veth) and checks, with
// real connections: the dump against ipvsadm -Ln, rr spread on a ClusterIP
// and on NodePorts of every node address, sh and ClientIP stickiness, mh
// with mh-port spreading one client, a backend reaching itself through its
// ClusterIP (KUBE-LOOP-BACK), graceful termination after a partial sync,
// and cleanup. The guest reports "SVCNET-VMTEST PASS" or "SVCNET-VMTEST
// FAIL: ..." on the serial console and powers off.
//
// Environment: SVCNET_VMTEST_CACHE overrides the cache directory
// (default $XDG_CACHE_HOME/svcnet-ipvsvm); SVCNET_VMTEST_KERNEL_DEB names a
// kernel .deb to use instead of downloading one.
package vmtest
