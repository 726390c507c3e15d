package v1beta1

// BFDProfilesResource and ConfigurationStatesResource are served as
// unstructured objects, like the other MetalLB kinds. svcnet's speaker
// speaks native BGP, which has no BFD, so nothing in svcnet reads either
// kind: the API serves them so that MetalLB's own controller and speaker
// (which watch BFDProfiles, and from v0.16 write ConfigurationStates) and
// manifests that carry them work against svcnet.
var (
	BFDProfilesResource         = SchemeGroupVersion.WithResource("bfdprofiles")
	ConfigurationStatesResource = SchemeGroupVersion.WithResource("configurationstates")
)
