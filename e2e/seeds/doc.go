// Package seeds runs the walkthroughs of the project's seed notes (Kubernetes
// Service tutorials) end to end against `svcnet up`, the way a user would:
// the real kubectl, curl, dig and nslookup, run from the machine hosting the
// cluster, from inside the node namespaces and from inside pods.
//
// TestMain builds the svcnet binary once. TestSeeds starts one three-node
// cluster per proxy mode (iptables, nftables, userspace; a mode the binary
// does not register is skipped with that reason) inside a network namespace
// the test creates and that has no route out, and runs every scenario as a
// subtest against it, in order: later scenarios build on the objects of
// earlier ones, as the walkthrough does. Public addresses of the seeds are
// replaced by documentation addresses (192.0.2.0/24, 198.51.100.0/24,
// 203.0.113.0/24) held by hosts the test creates inside the sandbox.
//
// The tests need root, ip, nsenter, kubectl, curl, dig and nslookup; they are
// skipped without them and with -short. Setting SVCNET_E2E_TRANSCRIPT=FILE
// appends every command and its output to FILE (the source of
// docs/tutorial.md's outputs); SVCNET_E2E_MODES=iptables,... limits the modes;
// SVCNET_E2E_PREFIX=svcnet names the nodes as a default `svcnet up` does (run
// one mode at a time then).
package seeds
