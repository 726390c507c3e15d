// Package validation checks MetalLB objects as MetalLB 0.16 does, in two
// layers, so that a bad object is refused with the message a MetalLB user
// would see and nothing is stored:
//
//   - Schema* check what the MetalLB CRDs' OpenAPI schemas check in
//     kube-apiserver (types, minimum/maximum, required fields); their field
//     errors become 422 Invalid responses ("spec.myASN in body should be
//     less than or equal to 4294967295").
//   - Peer, Advertisement, Communities and Pools are MetalLB's validating
//     webhooks: they parse the new object together with the existing ones
//     (and report conflicts between them) and return MetalLB's messages,
//     which the API server wraps as kube-apiserver wraps a webhook denial.
//
// svcnet's speaker speaks BGP through gobgp, like MetalLB's native (non-FRR)
// speaker, so peers that ask for FRR-only features are refused with
// MetalLB's native-mode messages: bfdProfile, vrf, interface, dynamicASN,
// localASN and enableGracefulRestart. Unlike MetalLB's native mode it
// announces IPv6 and large communities (gobgp does both), and it accepts
// keepaliveTime and connectTime.
//
// The package has no I/O and depends only on the API types: the apiserver's
// registry calls it at admission, the speaker calls ParseCommunity and
// Communities to resolve what it announces.
package validation
